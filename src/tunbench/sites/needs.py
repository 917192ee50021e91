"""What a run's plan asks of the site it runs on, as plain values: the session builds a `SiteNeeds` from its
RunPlan (sites sit below the plan and the workloads, so they cannot read either), and each site refuses
from it what it cannot do, before anything starts, with the same errors whichever way the run was asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from tunbench.topology.addresses import Family


class CpuRequest(Protocol):
    """`[run] cpuset` as the scenario gives it (config.cpuset.CpuSetting): off, split, or the CPUs per side."""

    @property
    def mode(self) -> str: ...

    @property
    def roles(self) -> tuple[tuple[str, tuple[int, ...]], ...]: ...

    def cpu_lists(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class NoCpus:
    """No CPU placement asked for (`cpuset = "off"`)."""

    mode: str = "off"
    roles: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def cpu_lists(self) -> dict[str, str]:
        return {}


@dataclass(frozen=True)
class SiteNeeds:
    """The plan as a site sees it. `source` names the scenario in errors; `kinds` are the run's workloads,
    `pair_kinds` those measured on the client/server pair and `not_pair` the first that is not (it brings up
    many clients or its own tunnels; "" when none); `fleet_kinds` the many-client ones and `fleet_sizes`
    their client counts, smallest first. `emulated` and `timed` name the profiles that emulate a link and
    those that change over time; `capped` the tunnel labels with client_cpu= / server_cpu=."""

    source: str = ""
    kinds: tuple[str, ...] = ()
    pair_kinds: tuple[str, ...] = ()
    not_pair: str = ""
    fleet_kinds: tuple[str, ...] = ()
    fleet_sizes: tuple[int, ...] = ()
    hosts_unplaced: tuple[str, ...] = ()  # the run's workloads --hosts cannot place (Workload.on_hosts)
    hosts_placeable: tuple[str, ...] = ()  # every registered workload it can, for the refusal's hint
    emulated: tuple[str, ...] = ()
    timed: tuple[str, ...] = ()
    underlay: Family = "ipv4"
    flamegraphs: bool = False
    capped: tuple[str, ...] = ()
    warm: int = 1
    cpuset: CpuRequest = field(default_factory=NoCpus)
    programs: Mapping[str, list[str]] = field(default_factory=dict)  # who -> the programs it needs where it runs
    start_tolerances: tuple[float, ...] = ()  # how closely clients on several machines must start (a storm's)
    cores: tuple[int, ...] = ()  # the cores axis (`--cores`, `[workload] cores`): CPUs per side, each case's
    cores_at: tuple[str, int | None, str] = ("", None, "workload.cores")  # where it was given: source, line, key
    instr_counter: str = ""  # `--count-instructions`: `[run] instr_counter` (auto, perf, callgrind); "": not counted
