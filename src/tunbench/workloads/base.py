"""The workload interface: what the runner needs from a traffic generator.

A workload starts its servers in `prepare` (outside the measured window), then `measure` runs inside the
window while the tunnel's processes are sampled, and returns plain numbers. Parsing tool output stays in
pure functions of each module (tested on committed outputs).
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from tunbench.state import Ledger
from tunbench.topology.build import Topology
from tunbench.tunnels.adapter import Target

TRIAL_SETUP_S = 1.5  # namespaces, tunnel bring-up and teardown of a typical trial on this kind of host


class NoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass
class Context:
    """Everything a workload may use during one trial."""

    topo: Topology
    target: Target
    ledger: Ledger
    workdir: Path
    title: str
    flows: int
    direction: str
    duration_s: float
    omit_s: float
    options: BaseModel
    server_port: int = 5201  # where the workload's server listens in the server namespace ({iperf_port})
    layer: str = "l3"  # the tunnel's layer: UDP workloads need an L3 tunnel (or direct)


@dataclass
class Measurement:
    metrics: dict[str, float | None] = field(default_factory=dict)
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    streams: list[tuple[int, str, float, int | None]] = field(default_factory=list)
    artifacts: dict[str, bytes] = field(default_factory=dict)
    # the measured part of the call, as (start, end) in time.monotonic(): e.g. iperf3's seconds after its
    # --omit warm-up, without connecting and the result exchange. The runner takes the CPU figures over
    # this window (the whole call's are kept beside them); None: the whole call was measured.
    window: tuple[float, float] | None = None


@dataclass
class TrialInput:
    """What a topology-owning workload gets from the runner for one trial."""

    case: Any  # plan.Case
    repetition: int
    record: Any  # results.TrialRecord, to fill in
    ledger: Ledger
    workdir: Path
    options: BaseModel
    duration_s: float
    omit_s: float
    topology: Any  # topology.build.TopologySpec: MTU and sysctls of the run
    link_factory: Any  # runner.LinkFactory | None
    link_seed: int
    hooks: list[Any]  # runner.WindowHook: run them around the measured window


class Workload(ABC):
    kind: ClassVar[str]
    description: ClassVar[str]
    # which matrix axes apply: a latency probe has no flows or direction
    axes: ClassVar[tuple[str, ...]] = ("flows", "direction")
    Options: ClassVar[type[BaseModel]] = NoOptions
    # the layers it can run through (UDP cannot cross a TCP port forward)
    layers: ClassVar[tuple[str, ...]] = ("l3", "l4")

    # a workload that builds its own topology (e.g. many client namespaces) sets this and implements
    # run_trial(); the runner then hands it the whole trial
    owns_topology: ClassVar[bool] = False

    def run_trial(self, trial: TrialInput) -> None:
        """For owns_topology workloads: build, measure, tear down; fill trial.record (metrics, series...)."""
        raise NotImplementedError

    def prepare(self, ctx: Context, stack: contextlib.ExitStack) -> None:  # noqa: B027 - optional hook
        """Start servers; register their teardown on `stack`."""

    @abstractmethod
    def measure(self, ctx: Context) -> Measurement:
        """Run inside the measured window."""

    def timeout_s(self, ctx: Context) -> float:
        """The watchdog: a `measure` call still running after this many seconds fails its trial."""
        return self.expected_s(ctx.flows, ctx.direction, ctx.options, ctx.duration_s, ctx.omit_s) + 30.0

    def trial_timeout_s(
        self, flows: int, direction: str, options: BaseModel, duration_s: float, omit_s: float
    ) -> float:
        """The watchdog of a topology-owning workload's whole `run_trial` (bring-up of N clients included)."""
        return 2.0 * self.expected_s(flows, direction, options, duration_s, omit_s) + 60.0

    def expected_s(self, flows: int, direction: str, options: BaseModel, duration_s: float, omit_s: float) -> float:
        """A rough wall-clock estimate of one trial (set-up included), for the run's time estimate and ETA."""
        return duration_s + omit_s + TRIAL_SETUP_S

    def options(self, raw: dict[str, Any] | None) -> BaseModel:
        return self.Options.model_validate(raw or {})
