"""What every trial shape shares: the run's settings (`Setup`), one attempt as a shape receives it
(`Attempt`) and its record as it starts; how an attempt ends is outcome.py's."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from tunbench import workloads
from tunbench.host.ledger import Ledger
from tunbench.monitor.interference import RedoPolicy
from tunbench.plan import Case, PlannedTrial
from tunbench.results import TrialRecord
from tunbench.sites.base import Pair, Site, Spot
from tunbench.store.db import now_iso
from tunbench.topology.build import TopologySpec
from tunbench.tunnels.tunnel import DaemonWrap, Tunnel
from tunbench.units import Window
from tunbench.workloads.base import Context, Measurement, Workload


class WindowHook(Protocol):
    """An optional add-on around the measured window (the perf profiler): entered just before the
    workload measures, exited right after; it may add metrics and artifacts to the trial record. `pair`
    is where the roles run (what the site counts on their own machines)."""

    def __call__(
        self, ctx: Context, tunnel: Tunnel, rec: TrialRecord, pair: Pair
    ) -> contextlib.AbstractContextManager[object]: ...


@dataclass(frozen=True)
class Setup:
    """What every trial of a run shares: where its roles run (`site`), the topology settings, the measured
    window (its measured seconds and the warm-up before them), each workload's options, the emulator's
    seed, the window hooks and which windows are void (`redo`: RetryTrial, measured again)."""

    ledger: Ledger
    site: Site
    window: Window
    topology: TopologySpec = field(default_factory=TopologySpec)
    options: dict[str, BaseModel] = field(default_factory=dict)
    seed: int = 1
    hooks: tuple[WindowHook, ...] = ()
    redo: RedoPolicy = field(default_factory=RedoPolicy)
    wrap: DaemonWrap | None = None  # each local tunnel daemon's command line, wrapped (counted instructions)

    def workload(self, pt: PlannedTrial) -> tuple[Workload[Any, Any], BaseModel]:
        """The trial's workload and its options (its defaults when the scenario gives none)."""
        workload = workloads.get(pt.case.workload)
        return workload, self.options.get(workload.kind) or workload.options(None)

    def spec(self, case: Case) -> TopologySpec:
        """The run's topology settings with the case's profile's own (MTU, sysctls, congestion control)."""
        return self.topology.with_profile(case.link.mtu, case.link.sysctl, case.link.congestion_control)

    def record(self, pt: PlannedTrial, options: BaseModel) -> TrialRecord:
        """The trial's record as it starts: its case and what it will be measured with."""
        c = pt.case
        return TrialRecord(
            seq=pt.seq,
            tunnel=c.tunnel.name,
            label=c.label,
            profile=c.profile,
            workload=c.workload,
            flows=c.flows,
            direction=c.direction,
            clients=c.clients,
            variant=c.variant,
            cores=c.cores,
            repetition=pt.repetition,
            started_at=now_iso(),
            params={
                "tunnel": c.tunnel.merged_params(),
                "workload": {
                    "kind": c.workload,
                    "flows": c.flows,
                    "direction": c.direction,
                    "duration_s": self.window.duration_s,
                    "omit_s": self.window.omit_s,
                    **options.model_dump(),
                },
                "profile": c.link.model_dump(),
                "mtu": self.topology.mtu,
                "ip": c.tunnel.families(),  # underlay / overlay (docs/adapters.md, "IPv6")
            },
        )


@dataclass(frozen=True)
class Attempt:
    """One attempt of a trial as a shape (pair, fleet, bring-ups, warm window) receives it."""

    case: Case
    workload: Workload[Any, Any]
    options: BaseModel
    rec: TrialRecord
    spot: Spot  # its name among the run's host objects (t3, t3r2), directory, topology, seed, warm slot
    began: float = field(default_factory=time.monotonic, compare=False)  # time.monotonic() as it started

    @property
    def tag(self) -> str:
        return self.spot.tag

    @property
    def workdir(self) -> Path:
        return self.spot.workdir


def merge(rec: TrialRecord, result: Measurement) -> None:
    """A workload's measurement into the trial's record."""
    rec.metrics.update(result.metrics)
    rec.series.update(result.series)
    rec.streams = result.streams
    rec.artifacts.update(result.artifacts)
    rec.params.update(result.params)
