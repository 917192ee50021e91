"""The local site: every role in a namespace of this machine. A pair is two namespaces and their link (a
veth, or tunbench-link between two TUN devices), each side in its role cgroup (placed on its CPUs with
`cpuset`); the N-client set-up is sites/local_fleet.py. This machine samples every role itself, reads the
namespaces' counters and counts the underlay bytes for the cross-checks. A plan holds it as a LocalChoice:
`[run] cpuset` resolved against this machine's CPUs (sites/cpuset.py)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tunbench.host.cgroup import CpuCap, RoleCgroup
from tunbench.host.ledger import Ledger
from tunbench.host.place import LocalPlace, Place
from tunbench.link.emulator import LinkEmulator, profile_link_builder
from tunbench.link.profile import Profile
from tunbench.monitor.callgrind import InstrWindow
from tunbench.monitor.counters import namespace_counters, short_ifname
from tunbench.monitor.interference import Thresholds, watched
from tunbench.monitor.sampler import RoleCost, Sampler
from tunbench.monitor.work import RoleCount
from tunbench.sites.base import SampledRoles, Spot
from tunbench.sites.cpuset import placement_text, resolve_cores, resolve_cpuset
from tunbench.sites.local_fleet import FleetEnv
from tunbench.sites.needs import SiteNeeds
from tunbench.topology.build import Topology
from tunbench.tunnels.registry import TunnelRef
from tunbench.tunnels.tunnel import ROLES, Tunnel


@dataclass(frozen=True)
class LocalPair:
    """A pair in this machine's namespaces (sites.base.Pair); `name` prefixes its cgroups (`tb1a2b3c-t3`)."""

    topo: Topology
    places: dict[str, Place]
    cgroups: dict[str, RoleCgroup]
    emulator: LinkEmulator | None
    ledger: Ledger
    name: str

    def clock_skew(self) -> tuple[float, float] | None:
        return None  # one clock

    def cpu_cap(self, stack: contextlib.ExitStack, role: str, period_us: int) -> CpuCap:
        return stack.enter_context(CpuCap(f"{self.name}-{role}-cap", self.ledger, period_us))

    def counted_elsewhere(self, tunnel: Tunnel) -> dict[str, Callable[[], RoleCount]]:
        return {}  # this machine's perf counts every role

    def instructions_elsewhere(
        self, tunnel: Tunnel, counter: str = "callgrind"
    ) -> dict[str, Callable[[str], InstrWindow]]:
        return {}  # this machine's callgrind counts every role

    def start_schedule(self) -> None:
        if self.emulator is not None:
            self.emulator.start_schedule()

    def counters(self, metrics: dict[str, float | None]) -> contextlib.AbstractContextManager[None]:
        namespaces = {"client": self.topo.client.name, "server": self.topo.server.name}
        return namespace_counters(namespaces, metrics, prefix=self.topo.prefix)

    def sampled_roles(self, tunnel: Tunnel) -> SampledRoles:
        roles: SampledRoles = {role: (functools.partial(tunnel.pids, role), self.cgroups.get(role)) for role in ROLES}
        link_pid = self.emulator.pid if self.emulator is not None else None
        if link_pid:
            roles["link"] = ((lambda: [link_pid]), None)
        return roles

    def remote_sampling(
        self, tunnel: Tunnel, sampler: Sampler
    ) -> contextlib.AbstractContextManager[dict[str, RoleCost]]:
        return contextlib.nullcontext({})  # nothing runs elsewhere

    def link_stats(self, final: bool) -> dict[str, Any] | None:
        return self.emulator.stats if final and self.emulator is not None else None

    def link_clock_offset_s(self) -> float | None:
        return 0.0

    def underlay(self) -> tuple[dict[str, str], bool] | None:
        devices = underlay_devices(self.topo)
        return {role: short_ifname(dev, self.topo.prefix) for role, dev in devices.items()}, self.topo.link is not None


def underlay_devices(topo: Topology) -> dict[str, str]:
    """The device each namespace's underlay traffic arrives on: the emulator's TUN ends, or the veth."""
    if isinstance(topo.link, LinkEmulator):
        return {"client": topo.link.a.dev, "server": topo.link.b.dev}
    return {"client": topo.ifname("vc"), "server": topo.ifname("vs")}


class LocalSite:
    """Roles in namespaces of this machine (sites.base.Site). `cpuset`: role -> CPU list ("link": the
    emulator's), the pair's placement; {} leaves the roles unplaced. `by_cores`: the placement of each value
    of the cores axis, which a spot's `cores` picks instead."""

    def __init__(
        self,
        ledger: Ledger,
        cpuset: Mapping[str, str] | None = None,
        by_cores: Mapping[int, Mapping[str, str]] | None = None,
    ) -> None:
        self.ledger = ledger
        self.cpuset = dict(cpuset or {})
        self.by_cores = {n: dict(placed) for n, placed in (by_cores or {}).items()}

    def placement(self, spot: Spot) -> dict[str, str]:
        """Each side's CPUs for this spot: its case's cores value's, else the run's."""
        if spot.cores:
            if spot.cores not in self.by_cores:
                raise ValueError(f"cores {spot.cores} was not settled for this run")
            return self.by_cores[spot.cores]
        return self.cpuset

    def pair(self, stack: contextlib.ExitStack, spot: Spot, profile: Profile, params: dict[str, Any]) -> LocalPair:
        link = profile_link_builder(profile, self.ledger, spot.workdir, spot.link_seed)
        name = f"{self.ledger.prefix}-{spot.tag}"  # the emulator's placement outlives it: entered first
        cpuset = self.placement(spot)
        link_cpus = cpuset.get("link", "") if link else ""
        link_cg = stack.enter_context(RoleCgroup(f"{name}-link", self.ledger, cpus=link_cpus, account=False))
        topo = stack.enter_context(Topology(self.ledger, spot.tag, spot.spec, link_builder=link, slot=spot.slot))
        cgroups = {
            role: stack.enter_context(RoleCgroup(f"{name}-{role}", self.ledger, cpus=cpuset.get(role, "")))
            for role in ROLES
        }
        places: dict[str, Place] = {
            role: LocalPlace(topo.ns_name(role), self.ledger, spot.workdir, placement=cgroups[role].placement_files)
            for role in ROLES
        }
        emulator = topo.link if isinstance(topo.link, LinkEmulator) else None
        if emulator is not None and emulator.pid and link_cg.cpus:
            link_cg.join(emulator.pid)
        if cpuset:
            params["cpuset"] = {r: c for r, c in cpuset.items() if r != "link" or link}
        return LocalPair(topo, places, cgroups, emulator, self.ledger, name)

    def client_machines(self) -> tuple[str, ...]:
        return ()  # this machine, unnamed

    @contextlib.contextmanager
    def bare_pair(
        self, spot: Spot, tunnel: TunnelRef, profile: Profile, params: dict[str, Any], machine: str | None = None
    ) -> Iterator[Tunnel]:
        if machine is not None:
            raise ValueError(f"a local run has no client machine {machine!r}")
        link = profile_link_builder(profile, self.ledger, spot.workdir, spot.link_seed)
        with (
            Topology(self.ledger, spot.tag, spot.spec, link_builder=link) as topo,
            Tunnel(tunnel, topo, self.ledger, spot.workdir, {}) as up,
        ):
            params.setdefault("sysctls", topo.sysctls_applied.get(topo.client.name, {}))
            yield up

    def fleet(
        self, spot: Spot, tunnel: TunnelRef, profile: Profile, clients: int, *, cpu_cap: bool, probe_interval_s: float
    ) -> FleetEnv:
        return FleetEnv(
            self.ledger,
            spot.tag,
            spot.workdir,
            tunnel,
            profile,
            spot.spec,
            spot.link_seed,
            clients,
            cpu_cap=cpu_cap,
            probe_interval_s=probe_interval_s,
        )

    def watched(
        self, metrics: dict[str, float | None], params: dict[str, Any], limits: Thresholds
    ) -> contextlib.AbstractContextManager[None]:
        return watched(metrics, params, self.ledger.prefix, limits)

    def instr_counter(self) -> tuple[str, str] | None:
        return None  # this machine's, the plan's

    def lost(self) -> list[str]:
        return []


@dataclass(frozen=True)
class LocalChoice:
    """The local site as a plan holds it (sites.base.SiteChoice): once settled, each side's CPUs (`[run]
    cpuset` resolved on this machine; {}: unplaced) and a note (e.g. the emulator shares a CPU)."""

    cpuset: Mapping[str, str] = field(default_factory=dict)
    note: str = ""
    cores: Mapping[int, tuple[Mapping[str, str], str]] = field(default_factory=dict)  # cores -> (placement, note)
    programs_here = True

    def settle(self, needs: SiteNeeds) -> LocalChoice:
        """The CPU placement resolved here (the run's, and each value of the cores axis), or refused where
        it cannot apply (sites/cpuset.py)."""
        cores = resolve_cores(needs)
        cpuset, note = resolve_cpuset(needs)
        return LocalChoice(cpuset, note, cores)

    def lines(self) -> list[str]:
        out = [f"cpuset: {placement_text(self.cpuset, self.note)}"] if self.cpuset else []
        for n, (placed, note) in self.cores.items():
            out.append(f"cores {n}: {placement_text(placed, note)}")
        return out

    def fleet_line(self, clients: int) -> str:
        return ""  # every client on this machine

    def client_count(self) -> int:
        return 1

    def open(
        self, stack: contextlib.ExitStack, ledger: Ledger, needs: SiteNeeds, provenance: dict[str, Any]
    ) -> LocalSite:
        return LocalSite(ledger, self.cpuset, {n: placed for n, (placed, _) in self.cores.items()})
