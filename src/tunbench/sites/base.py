"""Where a trial's roles run, behind one protocol: a `Site` brings a client/server pair up (a `Pair`), the
N-client set-up (a fleet env), or the bare pair of a workload that measures bring-up itself; it says which
processes are sampled where, what else is watched around a window, and whether the run can go on.

Two sites implement it: this machine's namespaces (sites/local.py) and hosts over SSH (sites/hosts.py).
The trial shapes (trial/) and the runner see only this module's protocols.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tunbench.host.cgroup import RoleCgroup
from tunbench.host.ledger import Ledger
from tunbench.host.place import Place
from tunbench.link.profile import Profile
from tunbench.monitor.interference import Thresholds
from tunbench.monitor.sampler import RoleCost, Sampler
from tunbench.sites.hosts_fleet import HostsFleetEnv
from tunbench.sites.local_fleet import FleetEnv
from tunbench.sites.needs import SiteNeeds
from tunbench.topology.build import TopologySpec
from tunbench.tunnels.registry import TunnelRef
from tunbench.tunnels.tunnel import Placed, Tunnel

AnyFleet = FleetEnv | HostsFleetEnv
"""A fleet set-up of either site: what a many-client workload is handed (workloads.base.FleetContext)."""

SampledRoles = dict[str, tuple[Callable[[], list[int]], RoleCgroup | None]]
"""The roles this machine's Sampler reads: role -> (its pids, its cgroup or None)."""


@dataclass(frozen=True)
class Spot:
    """One attempt's names and settings on a site: its tag among the run's objects (`t3`, `t3r2`, `t7w`),
    its directory, the topology settings, the emulator's seed, and a warm block's slot ("" or "1", "2"...)."""

    tag: str
    workdir: Path
    spec: TopologySpec
    link_seed: int
    slot: str = ""


class PairTopology(Placed, Protocol):
    """What a trial reads of a pair's topology besides what a tunnel needs (tunnels.adapter.Placed)."""

    sysctls_applied: dict[str, dict[str, str]]

    def effective_settings(self) -> dict[str, Any]: ...


class Pair(Protocol):
    """A client/server pair a site brought up (its tunnel not yet): what a measured window needs from where
    the roles run."""

    @property
    def topo(self) -> PairTopology: ...

    @property
    def places(self) -> dict[str, Place]: ...

    @property
    def cgroups(self) -> dict[str, RoleCgroup]:
        """The roles' accounting cgroups on this machine ({}: none here)."""
        ...

    def clock_skew(self) -> tuple[float, float] | None:
        """(server clock - client clock, uncertainty) in seconds when the roles are on two hosts, else None."""
        ...

    def start_schedule(self) -> None:
        """The profile's events count from the workload's start: started just before it (if emulated)."""
        ...

    def counters(self, metrics: dict[str, float | None]) -> contextlib.AbstractContextManager[None]:
        """The namespaces' counter deltas over the window, where the site can read them."""
        ...

    def sampled_roles(self, tunnel: Tunnel) -> SampledRoles:
        """The roles this machine samples (its namespaces' tunnel processes, its emulator)."""
        ...

    def remote_sampling(
        self, tunnel: Tunnel, sampler: Sampler
    ) -> contextlib.AbstractContextManager[dict[str, RoleCost]]:
        """The roles sampled elsewhere over the same window; their costs, on `sampler`'s clock, on exit."""
        ...

    def link_stats(self, final: bool) -> dict[str, Any] | None:
        """The emulator's counters (`final`: the pair has been torn down, so they are complete), or None."""
        ...

    def link_clock_offset_s(self) -> float | None:
        """The emulator's monotonic clock minus this machine's (None: unknown)."""
        ...

    def underlay(self) -> tuple[dict[str, str], bool] | None:
        """(role -> the short name of the device its underlay traffic arrives on, whether a link is emulated)
        for the byte cross-checks; None where the site cannot count them."""
        ...


class Site(Protocol):
    """Where a run's roles run: it brings up and tears down (on the given stack or as a context manager)
    every shape a trial takes, and watches what else runs beside a window."""

    def pair(self, stack: contextlib.ExitStack, spot: Spot, profile: Profile, params: dict[str, Any]) -> Pair:
        """The client/server pair's topology, role cgroups and places, entered on `stack`; what it placed is
        recorded in `params`."""
        ...

    def client_machines(self) -> tuple[str, ...]:
        """The machines a client may run on, by name (a run's client hosts); () for this machine alone."""
        ...

    def bare_pair(
        self, spot: Spot, tunnel: TunnelRef, profile: Profile, params: dict[str, Any], machine: str | None = None
    ) -> contextlib.AbstractContextManager[Tunnel]:
        """A fresh pair and its tunnel, for a workload whose measurement is the bring-up itself; its client on
        `machine` (one of client_machines(); None: the site's first or only one)."""
        ...

    def fleet(
        self, spot: Spot, tunnel: TunnelRef, profile: Profile, clients: int, *, cpu_cap: bool, probe_interval_s: float
    ) -> AnyFleet:
        """The N-client set-up (entered by the caller): topology, cgroups, the tunnel server, the probe."""
        ...

    def watched(
        self, metrics: dict[str, float | None], params: dict[str, Any], limits: Thresholds
    ) -> contextlib.AbstractContextManager[None]:
        """The host load and what else ran (other runs, foreign CPU, the harness's own) around a window."""
        ...

    def lost(self) -> list[str]:
        """The machines the run can no longer reach (the run stops after the trial that found out)."""
        ...


class SiteChoice(Protocol):
    """A site as a plan holds it, chosen before the run: `settle` refuses what the site cannot do for the
    plan (a ConfigError naming the setting) and gives the choice back with what it resolved; the plan's text
    shows its `lines`; the session opens it for the run, on the run's stack."""

    def settle(self, needs: SiteNeeds) -> SiteChoice:
        """This choice checked against `needs`, and resolved (e.g. the CPUs of each side)."""
        ...

    def lines(self) -> list[str]:
        """What the plan's text says of where the roles run (each side's CPUs, which host takes which role)."""
        ...

    def fleet_line(self, clients: int) -> str:
        """Where a fleet of `clients` clients runs, when that is more than one machine ("" else)."""
        ...

    def open(self, stack: contextlib.ExitStack, ledger: Ledger, needs: SiteNeeds, provenance: dict[str, Any]) -> Site:
        """The site for the run, entered on `stack` (connections, checks there); what it learnt of the machines
        it runs on goes into the run's `provenance`."""
        ...
