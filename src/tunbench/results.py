"""What a run produces, as plain data shared by runner, store, stats and reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CaseKey:
    """One cell of the matrix, without the repetition."""

    label: str
    profile: str
    workload: str
    flows: int
    direction: str
    clients: int = 1  # the multi-client workloads' axes (1 and "" for the others)
    variant: str = ""
    cores: int = 0  # the cores axis (`--cores`): CPUs each side was placed on; 0: not on that axis


@dataclass
class TrialRecord:
    seq: int
    tunnel: str
    label: str
    profile: str
    workload: str
    flows: int
    direction: str
    repetition: int
    params: dict[str, Any]
    clients: int = 1  # the multi-client workloads' axes: client count and storm variant (1 and "" for the others)
    variant: str = ""
    cores: int = 0  # the cores axis: CPUs each side was placed on (docs/scaling.md); 0: not on that axis
    status: str = "ok"
    error: str = ""
    started_at: str = ""
    # the measured window's seconds (metrics["window_s"]); stored and exported as `duration_s` (the
    # store's column and the JSON/CSV field keep that name so older stores and exports read back)
    window_s: float | None = None
    metrics: dict[str, float | None] = field(default_factory=dict)
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    streams: list[tuple[int, str, float, int | None]] = field(default_factory=list)
    artifacts: dict[str, bytes] = field(default_factory=dict)
    id: int | None = None

    @property
    def case(self) -> CaseKey:
        return CaseKey(
            self.label, self.profile, self.workload, self.flows, self.direction, self.clients, self.variant, self.cores
        )


@dataclass
class RunRecord:
    id: int
    uid: str
    name: str
    started_at: str
    finished_at: str | None
    status: str
    tunbench_version: str
    provenance: dict[str, Any]
    scenario_text: str
    scenario_hash: str
    scenario: dict[str, Any]
    trials: list[TrialRecord] = field(default_factory=list)
