"""Where a trial's roles run, behind one protocol: a `Site` brings a client/server pair up (a `Pair`), the
N-client set-up (a `FleetSetup`), or the bare pair of a workload that measures bring-up itself; it says
which processes are sampled where, what else is watched around a window, and whether the run can go on.
A plan holds its site as a `SiteChoice`, which refuses what the site cannot do and opens it for the run.

Two sites implement it: this machine's namespaces (sites/local.py) and hosts over SSH (sites/hosts.py);
sites/registry.py names them.
The trial shapes (trial/), the workloads and the runner see only this module's protocols, and this module
imports no site.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from tunbench.host.cgroup import RoleCgroup
from tunbench.host.ledger import Ledger
from tunbench.host.place import Place
from tunbench.link.profile import Profile
from tunbench.monitor.callgrind import InstrWindow
from tunbench.monitor.interference import Thresholds
from tunbench.monitor.sampler import RoleCost, Sampler
from tunbench.monitor.work import RoleCount
from tunbench.sites.needs import SiteNeeds
from tunbench.topology.build import TopologySpec
from tunbench.topology.layout import Layout
from tunbench.tunnels.fleet import Fleet
from tunbench.tunnels.registry import TunnelRef
from tunbench.tunnels.tunnel import Placed, Tunnel

# wall clock per client for namespace + veth, keys or certificates, and a storm's bring-up; about 40 s for
# 500 OpenVPN clients on the 2-core host of docs/benchmarks/clients.md. Only for the run's time estimate.
PER_CLIENT_SETUP_S = 0.08

SampledRoles = dict[str, tuple[Callable[[], list[int]], RoleCgroup | None]]
"""The roles this machine's Sampler reads: role -> (its pids, its cgroup or None)."""


@dataclass(frozen=True)
class Spot:
    """One attempt's names and settings on a site: its tag among the run's objects (`t3`, `t3r2`, `t7w`),
    its directory, the topology settings, the emulator's seed, a warm block's slot ("" or "1", "2"...), and
    its case's cores (the CPUs each side is placed on, docs/scaling.md; 0: the run's placement)."""

    tag: str
    workdir: Path
    spec: TopologySpec
    link_seed: int
    slot: str = ""
    cores: int = 0


class PairTopology(Placed, Protocol):
    """What a trial reads of a pair's topology besides what a tunnel needs (tunnels.tunnel.Placed)."""

    sysctls_applied: dict[str, dict[str, str]]

    def effective_settings(self) -> dict[str, Any]: ...


class Cap(Protocol):
    """A CPU quota on some processes (host.cgroup.CpuCap here, remote.cap.RemoteCpuCap on a host)."""

    def add(self, pids: list[int]) -> None: ...

    def limit(self, pct_of_one_core: float | None) -> None:
        """Hold them to this share of one core (None: lift the quota)."""
        ...


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

    def cpu_cap(self, stack: contextlib.ExitStack, role: str, period_us: int) -> Cap:
        """A CPU quota for `role`'s tunnel processes (client_cpu= / server_cpu=), entered on `stack` before the
        tunnel starts (so it is removed after the tunnel has stopped them); where the site cannot cap, it
        raises (its choice refused the setting before the run)."""
        ...

    def counted_elsewhere(self, tunnel: Tunnel) -> dict[str, Callable[[], RoleCount]]:
        """The roles whose counted work (`--count-work`) the machine they run on reads (its agent's perf), each
        attached when called; every other role is counted by this machine's perf."""
        ...

    def instructions_elsewhere(
        self, tunnel: Tunnel, counter: str = "callgrind"
    ) -> dict[str, Callable[[str], InstrWindow]]:
        """The roles whose tunnel daemon the machine they run on counts (`--count-instructions`: its agent's
        callgrind, or with `counter="perf"` its perf's `instructions:u`), each a function of the role's tunnel
        device's name that switches the count on; every other role is counted on this machine."""
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


@dataclass
class SampledCost:
    """The sampling of one traffic phase of a fleet: per role (`server`, `clients`, and `link` where this
    machine runs the emulator), and its wall time; with several client hosts, `results["clients"]` sums them
    and `per_host` holds each host's clients. `stage` and `stage_params`: the saturated stage over the phase
    (monitor/stage.py's metrics and params), where the site reads it (between hosts); the workload keeps its
    measured phase's."""

    results: dict[str, RoleCost] = field(default_factory=dict)
    wall_s: float = 0.0
    per_host: dict[str, RoleCost] = field(default_factory=dict)
    stage: dict[str, float | None] = field(default_factory=dict)
    stage_params: dict[str, object] = field(default_factory=dict)


class ReadyProbe(Protocol):
    """Which of a fleet's clients have a working tunnel: `ready_at[i]`, this machine's monotonic time of
    client i's first answer since `watch`."""

    @property
    def ready_at(self) -> dict[int, float]: ...

    def watch(self, keys: Iterable[int]) -> None: ...

    def wait(self, keys: Iterable[int], deadline: float) -> bool:
        """Until every one of `keys` is ready or `deadline` (monotonic) has passed: whether all are."""
        ...


class FleetSetup(Protocol):
    """The N-client set-up a site brings up for a many-client workload (`clients`, `storm`), entered by the
    trial: the clients' topology (`layout`), the tunnel server and its clients (`fleet`), the readiness
    probe and, when asked, a CPU cap on the server. `metrics` collects what the set-up itself measured.
    Where the clients are spread over several machines it names them (`host_of`, `clients_per_host`) and
    agrees their start; on one machine those are empty."""

    metrics: dict[str, float | None]

    @property
    def local(self) -> bool:
        """Every role on this machine: its host-wide CPU share is read, and a client starts in a few ms."""
        ...

    @property
    def fleet(self) -> Fleet: ...

    @property
    def layout(self) -> Layout: ...

    @property
    def probe(self) -> ReadyProbe | None: ...

    @property
    def cap(self) -> Cap | None:
        """The server's CPU cap (storm's overload variant), when the set-up was asked for one."""
        ...

    def __enter__(self) -> FleetSetup: ...

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None: ...

    def recorded(self) -> dict[str, object]:
        """What the trial's params record about the set-up, once it is up."""
        ...

    def counters(
        self, metrics: dict[str, float | None], key_prefix: str = ""
    ) -> contextlib.AbstractContextManager[None]:
        """Counter deltas over a phase, where the site can read them."""
        ...

    def sampling(self) -> contextlib.AbstractContextManager[SampledCost]:
        """One phase's cost sampling; the yielded SampledCost is filled when the block ends."""
        ...

    def failures_text(self, errors: dict[int, str], limit: int = 3) -> str:
        """The first `limit` failed clients: each one's error and the tail of its log."""
        ...

    def host_of(self) -> dict[int, str]:
        """Each client's machine by name, by fleet index ({}: every client on this machine)."""
        ...

    def clients_per_host(self) -> dict[str, int]:
        """Each client machine by name and how many clients it takes ({}: this machine alone)."""
        ...

    def start_lead_s(self, tolerance_s: float) -> float | None:
        """Before a start agreed among machines: how long after the requests go out the clients start (their
        clocks checked against `tolerance_s` first); None where they simply start at once."""
        ...

    def start_late_s(self) -> dict[str, float]:
        """After an agreed start: per machine, its first launch minus the agreed instant ({}: none agreed)."""
        ...

    def clock_uncertainty_s(self) -> float:
        """How well the client machines' starts can be compared (0: one clock)."""
        ...

    def lost_clients(self) -> dict[str, str]:
        """The client machines lost since the set-up, by name, each with why ({}: none, or one machine).
        Their clients are lost with them; the trial keeps the other machines' (a lost server fails it)."""
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
    ) -> FleetSetup:
        """The N-client set-up (entered by the caller): topology, cgroups, the tunnel server, the probe."""
        ...

    def watched(
        self, metrics: dict[str, float | None], params: dict[str, Any], limits: Thresholds
    ) -> contextlib.AbstractContextManager[None]:
        """The host load and what else ran (other runs, foreign CPU, the harness's own) around a window."""
        ...

    def instr_counter(self) -> tuple[str, str] | None:
        """With `--count-instructions`, the counter the machines the roles run on chose when the site opened
        ("perf" or "callgrind") and why; None: this machine's choice, the plan's, stands."""
        ...

    def lost(self) -> list[str]:
        """The machines the run can no longer reach (the run stops after the trial that found out)."""
        ...


class SiteChoice(Protocol):
    """A site as a plan holds it, chosen before the run: `settle` refuses what the site cannot do for the
    plan (a ConfigError naming the setting) and gives the choice back with what it resolved; the plan's text
    shows its `lines`; the session opens it for the run, on the run's stack."""

    @property
    def programs_here(self) -> bool:
        """Whether the roles' programs are this machine's (checked before the run); False: the site checks
        them on the machines they run on, when it opens."""
        ...

    def settle(self, needs: SiteNeeds) -> SiteChoice:
        """This choice checked against `needs`, and resolved (e.g. the CPUs of each side)."""
        ...

    def lines(self) -> list[str]:
        """What the plan's text says of where the roles run (each side's CPUs, which host takes which role)."""
        ...

    def fleet_line(self, clients: int) -> str:
        """Where a fleet of `clients` clients runs, when that is more than one machine ("" else)."""
        ...

    def client_count(self) -> int:
        """How many machines a client may run on: a workload that brings its pairs up itself (`connect`) takes
        turns on each, so its trials last that many times longer."""
        ...

    def open(self, stack: contextlib.ExitStack, ledger: Ledger, needs: SiteNeeds, provenance: dict[str, Any]) -> Site:
        """The site for the run, entered on `stack` (connections, checks there); what it learnt of the machines
        it runs on goes into the run's `provenance`."""
        ...
