"""The hosts site (`--hosts`): the roles on the run's hosts, reached over SSH through each host's agent.
A pair is remote/topology.py's HostsTopology (two hosts, or both roles on one), a bare pair one on the client
host a bring-up workload asks for (any of the run's client hosts); the N-client set-up is
sites/hosts_fleet.py. Each remote role is sampled by its host's agent over the window and mapped onto
this machine's clock; the emulator runs on the client's host. What else ran is watched on every host,
and a lost connection stops the run. A plan holds it as a HostsChoice: the inventory, checked against the
plan's needs before anything starts (sites/hosts_checks.py), and opened by connecting to the hosts."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tunbench.errors import ConfigError, DependencyMissing, TrialError
from tunbench.host.cgroup import RoleCgroup
from tunbench.host.ledger import Ledger
from tunbench.host.place import Place
from tunbench.host.workdir import workdir
from tunbench.link.profile import Profile
from tunbench.monitor.callgrind import InstrWindow
from tunbench.monitor.interference import Thresholds, watched
from tunbench.monitor.sampler import RoleCost, Sampler
from tunbench.monitor.work import RoleCount
from tunbench.remote.instructions import RemoteInstructions, run_counter
from tunbench.remote.inventory import Inventory
from tunbench.remote.place import RemotePlace
from tunbench.remote.spread import spread
from tunbench.remote.topology import HostRun, HostsTopology, underlay_address
from tunbench.remote.watch import CountRequest, host_window, run_prefixes
from tunbench.remote.work import RemoteCounting
from tunbench.sites.base import Cap, SampledRoles, Spot
from tunbench.sites.hosts_checks import check_cpuset_and_events, check_placeable, hosts_lines
from tunbench.sites.hosts_cores import HostCpus, HostPlacement, check_cores, cores_line, host_placement, placement_lines
from tunbench.sites.hosts_fleet import HostsFleetEnv
from tunbench.sites.hosts_start import check_clocks
from tunbench.sites.needs import SiteNeeds
from tunbench.tunnels.registry import TunnelRef
from tunbench.tunnels.tunnel import ROLES, Tunnel


@dataclass(frozen=True)
class HostsPair:
    """A pair on the run's hosts (sites.base.Pair)."""

    topo: HostsTopology
    places: dict[str, Place]
    host_run: HostRun
    counts: CountRequest | None = None  # what its windows count on its hosts (None: nothing)

    @property
    def cgroups(self) -> dict[str, RoleCgroup]:
        return {}  # the roles' cgroups are the agents'

    def clock_skew(self) -> tuple[float, float] | None:
        return self.topo.clock_skew()

    def cpu_cap(self, stack: contextlib.ExitStack, role: str, period_us: int) -> Cap:
        raise TrialError(  # refused before the run (sites/hosts_checks.py)
            "client_cpu= / server_cpu= cap processes on this machine: not with --hosts"
        )

    def counted_elsewhere(self, tunnel: Tunnel) -> dict[str, Callable[[], RoleCount]]:
        """Every role, by the agent of its host (remote/work.py)."""
        return {
            role: functools.partial(
                RemoteCounting, self.topo.place(role), role, [d] if (d := tunnel.daemons.get(role)) else []
            )
            for role in ROLES
        }

    def instructions_elsewhere(
        self, tunnel: Tunnel, counter: str = "callgrind"
    ) -> dict[str, Callable[[str], InstrWindow]]:
        """Every role with a daemon, by the agent of its host (remote/instructions.py) with `counter`."""
        return {
            role: functools.partial(RemoteInstructions, self.topo.place(role), role, [d], counter=counter)
            for role in ROLES
            if (d := tunnel.daemons.get(role)) is not None
        }

    def start_schedule(self) -> None:
        pass  # the agent's emulator starts its schedule itself

    @contextlib.contextmanager
    def counters(self, metrics: dict[str, float | None]) -> Iterator[None]:
        """The hosts' underlay devices, read by the site's watch at the window's edges (remote/watch.py)."""
        self.host_run.count_request = self.counts
        try:
            yield None
        finally:
            self.host_run.count_request = None

    def sampled_roles(self, tunnel: Tunnel) -> SampledRoles:
        return {}  # every role is sampled on its host

    def remote_sampling(
        self, tunnel: Tunnel, sampler: Sampler
    ) -> contextlib.AbstractContextManager[dict[str, RoleCost]]:
        link = self.topo.place("client") if self.topo.emulated else None  # the client's egress, or the pair
        return remote_sampling(tunnel, self.topo, sampler, link)

    def link_stats(self, final: bool) -> dict[str, Any] | None:
        return self.topo.link_stats

    def link_clock_offset_s(self) -> float | None:
        clock = self.host_run.conn("client").clock  # where the emulator runs
        return clock.mono_s if clock is not None else None

    def underlay(self) -> tuple[dict[str, str], bool] | None:
        """Each role's underlay device on its host, once a window has counted both."""
        if self.counts is None or set(self.counts.devices) != set(ROLES):
            return None
        return dict(self.counts.devices), False


def count_request(topo: HostsTopology, host_run: HostRun) -> CountRequest | None:
    """What a pair's windows count: each role's host's underlay device (the one holding its underlay
    address), where each role runs in its host's own namespace (two hosts, no emulated profile); None else
    (one host with both roles joins them by a veth or the emulator, and an emulated client sends from its
    egress namespace)."""
    if topo.shared or topo.emulated:
        return None
    roles: dict[str, tuple[str, ...]] = {}
    addresses: dict[str, str] = {}
    for role in ROLES:
        host = topo.hosts_by_role[role]
        if not (address := underlay_address(host, host_run.underlay)):
            return None
        roles[host.name] = (*roles.get(host.name, ()), role)
        addresses[host.name] = address
    return CountRequest(roles, addresses)


@contextlib.contextmanager
def remote_sampling(
    tunnel: Tunnel, topo: HostsTopology, sampler: Sampler, link: RemotePlace | None = None
) -> Iterator[dict[str, RoleCost]]:
    """Each role sampled by its host's agent over the same window, and the emulator where `link` is the
    place that runs one (role "link", as a local run samples its own); on exit the yielded dict holds their
    costs on this machine's sampler clock (the clock offset measured at connect maps them)."""
    started: list[tuple[str, RemotePlace, str]] = []
    out: dict[str, RoleCost] = {}
    try:
        for role in ROLES:
            place = topo.place(role)
            d = tunnel.daemons.get(role)
            # with its threads, its host's CPUs and its placements: the saturated stage (monitor/stage.py)
            started.append((role, place, place.sample_start(role, [d] if d else [], threads=True)))
        if link is not None:
            started.append(("link", link, link.sample_start("link", [])))
        yield out
    except BaseException:
        for _, place, key in started:  # a start or the measurement failed: its error is the one to see
            place.sample_abandon(key)
        raise
    stopping = list(started)
    try:
        while stopping:  # each one stopped whatever happens to another
            role, place, key = stopping.pop(0)
            out[role] = place.sample_stop(key, sampler.t0)
    finally:
        for _, place, key in stopping:
            place.sample_abandon(key)


class HostsSite:
    """Roles on the run's hosts (sites.base.Site), over the connections `host_run` holds (one agent per host)."""

    def __init__(
        self,
        host_run: HostRun,
        ledger: Ledger,
        by_cores: Mapping[int, Mapping[str, HostPlacement]] | None = None,
        instr: tuple[str, str] | None = None,
    ) -> None:
        """`by_cores`: each value of the cores axis, as each role's side's CPUs on its host ({}: unplaced).
        `instr`: the counter of `--count-instructions` the hosts chose, and why."""
        self.host_run = host_run
        self.ledger = ledger
        self.by_cores = dict(by_cores or {})
        self.instr = instr

    def pair(self, stack: contextlib.ExitStack, spot: Spot, profile: Profile, params: dict[str, Any]) -> HostsPair:
        placed: Mapping[str, HostPlacement] = {}
        if spot.cores:
            if spot.cores not in self.by_cores:
                raise ValueError(f"cores {spot.cores} was not settled for this run")
            placed = self.by_cores[spot.cores]
        cpus = {role: p.agent_cpus() for role, p in placed.items()}
        topo = stack.enter_context(
            HostsTopology(self.host_run, self.ledger.prefix, spot.tag, spot.spec, profile, spot.link_seed, cpus=cpus)
        )
        if topo.placed:  # each side's CPUs as its host's cpusets hold them (read back by the agent)
            params["cpuset"] = {role: got.get("tunnel", "") for role, got in topo.placed.items()}
            params["cpuset_generator"] = {role: got.get("generator", "") for role, got in topo.placed.items()}
            params["cpuset_hosts"] = {role: topo.hosts_by_role[role].name for role in topo.placed}  # `show` names them
        places: dict[str, Place] = {role: topo.place(role) for role in ROLES}
        return HostsPair(topo, places, self.host_run, count_request(topo, self.host_run))

    def client_machines(self) -> tuple[str, ...]:
        return tuple(h.name for h in self.host_run.client_hosts)

    @contextlib.contextmanager
    def bare_pair(
        self, spot: Spot, tunnel: TunnelRef, profile: Profile, params: dict[str, Any], machine: str | None = None
    ) -> Iterator[Tunnel]:
        """A fresh topology between the client host `machine` (the first by default) and the server host, and
        the tunnel on it, as pair() and trial/pair.py bring them up (the roles' cgroups are the agents')."""
        by_name = {h.name: h for h in self.host_run.client_hosts}
        if machine is not None and machine not in by_name:
            raise ValueError(f"{machine!r} is not a client host of this run ({', '.join(by_name)})")
        client = by_name[machine] if machine is not None else None
        with (
            HostsTopology(
                self.host_run, self.ledger.prefix, spot.tag, spot.spec, profile, spot.link_seed, client=client
            ) as topo,
            Tunnel(tunnel, topo, self.ledger, spot.workdir, {}) as up,
        ):
            params.setdefault("sysctls", topo.sysctls_applied.get(topo.ns_name("client"), {}))
            yield up

    def fleet(
        self, spot: Spot, tunnel: TunnelRef, profile: Profile, clients: int, *, cpu_cap: bool, probe_interval_s: float
    ) -> HostsFleetEnv:
        # the server on the server host, the clients spread over the client hosts
        return HostsFleetEnv(
            self.host_run,
            self.ledger,
            spot.tag,
            spot.workdir,
            tunnel,
            spot.spec,
            clients,
            cpu_cap=cpu_cap,
            probe_interval_s=probe_interval_s,
        )

    @contextlib.contextmanager
    def watched(self, metrics: dict[str, float | None], params: dict[str, Any], limits: Thresholds) -> Iterator[None]:
        """Each host's foreign CPU, steal, other runs and agent's CPU, judged per host, with its edges read at the
        same instants as this machine's load (remote/watch.py); this machine's foreign CPU and steal are
        recorded but not judged (the roles run on the hosts), and the run's agents are not other runs. A pair's
        underlay counters are read at the same edges (HostsPair.counters)."""
        conns = list(self.host_run.conns.values())
        mine = dataclasses.replace(limits, foreign_cpu_pct=None, steal_pct=None)
        local = watched(metrics, params, run_prefixes(conns, self.ledger.prefix), mine)
        counts = self.host_run.count_request
        with host_window(conns, metrics, params, self.ledger.prefix, limits, local, counts):
            yield None

    def instr_counter(self) -> tuple[str, str] | None:
        return self.instr

    def lost(self) -> list[str]:
        return [c.name for c in self.host_run.conns.values() if c.lost]


@dataclass(frozen=True)
class HostsChoice:
    """The hosts site as a plan holds it (sites.base.SiteChoice): the run's inventory, and once settled the
    workloads measured on the pair (which the plan's text places on the first client host)."""

    inventory: Inventory
    pair_kinds: tuple[str, ...] = ()
    cores: tuple[int, ...] = ()  # the cores axis, checked against each host's CPUs when the run connects
    # what the run learned of its hosts' CPUs on connecting (the cores axis): shown with the plan's lines
    # from then on (the run's output prints them after open)
    connected: list[str] = dataclasses.field(default_factory=list, compare=False)
    programs_here = False  # each host's, checked when the run connects

    def settle(self, needs: SiteNeeds) -> HostsChoice:
        """Refuse what the hosts cannot do yet (sites/hosts_checks.py), naming the setting."""
        check_placeable(self.inventory, needs)
        check_cpuset_and_events(needs)
        check_cores_placeable(self.inventory, needs)
        return dataclasses.replace(self, pair_kinds=needs.pair_kinds, cores=needs.cores, connected=[])

    def lines(self) -> list[str]:
        out = hosts_lines(self.inventory, self.pair_kinds)
        if self.cores and not self.connected:
            out.append(
                f"cores on hosts: {', '.join(map(str, self.cores))}, each at most a host's CPUs less one for the "
                "generator (checked when the run connects to the hosts)"
            )
        return out + self.connected

    def client_count(self) -> int:
        return max(1, len(self.inventory.clients()))

    def fleet_line(self, clients: int) -> str:
        if len(self.inventory.clients()) < 2:
            return ""
        return "clients: " + ", ".join(f"{sh.host.name} {sh.count}" for sh in spread(clients, self.inventory.clients()))

    def open(
        self, stack: contextlib.ExitStack, ledger: Ledger, needs: SiteNeeds, provenance: dict[str, Any]
    ) -> HostsSite:
        """Connect to every host the run uses (every client host when a workload spreads over them), check
        each host's programs and the clocks a storm agrees its start on, and record the hosts in `provenance`."""
        logdir = stack.enter_context(workdir(ledger, "ssh"))
        host_run = stack.enter_context(
            HostRun(self.inventory, ledger, logdir, needs.underlay, all_clients=bool(needs.not_pair))
        )
        missing = host_run.tools_missing(dict(needs.programs))
        if needs.emulated and not host_run.conn("client").call("capabilities")["tunbench_link"]:
            missing.append(
                f"{host_run.roles['client'].name}: tunbench-link (`make build` there) for the emulated profiles"
            )
        if missing:
            raise DependencyMissing("programs missing on the hosts:\n  " + "\n  ".join(missing))
        for tolerance in needs.start_tolerances:  # a storm's clocks before anything starts (measured again at each)
            check_clocks(host_run, host_run.client_hosts, tolerance, source=needs.source)
        provenance["hosts"] = host_run.provenance()
        by_cores, said, cpus = host_cores(host_run, needs)
        self.connected[:] = said  # the lines the run prints once connected (lines())
        if by_cores:
            provenance["cores_on_hosts"] = {
                "hosts": {h.name: {"cpus": list(h.cpus), "cpuset_root": h.root} for h in cpus},
                "placement": {
                    n: {role: dataclasses.asdict(p) for role, p in placed.items()} for n, placed in by_cores.items()
                },
            }
        instr = None
        if needs.instr_counter:  # one counter for the hosts of the pair's roles (remote/instructions.py)
            pair_hosts = {h.name: h for h in (host_run.roles["client"], host_run.roles["server"])}
            can = {name: str(host_run.conn_of(h).call("instr_capability")["why"]) for name, h in pair_hosts.items()}
            instr = run_counter(needs.instr_counter, can)
            self.connected.append(f"counted instructions on the hosts: {instr[0]} ({instr[1]})")
            provenance["instr_counter_hosts"] = {"counter": instr[0], "why": instr[1], "perf": can}
        return HostsSite(host_run, ledger, by_cores, instr)


def check_cores_placeable(inventory: Inventory, needs: SiteNeeds) -> None:
    """The cores axis on hosts places the client/server pair on two hosts: refused, naming where it was
    given, with a workload off the pair and with one host for both roles."""
    if not needs.cores:
        return
    source, line, key = needs.cores_at
    if kind := needs.not_pair:
        raise ConfigError(
            f"the cores axis places the client/server pair; workload {kind!r} brings up many clients or its own "
            "tunnels: run it without cores",
            source=source,
            line=line,
            key=key,
        )
    client, server = inventory.for_role("client"), inventory.for_role("server")
    if client.name == server.name:
        raise ConfigError(
            f"the cores axis on hosts gives each side a host of its own, and {client.name} takes both roles: "
            "run the cores axis locally (without --hosts), or give the server role another host",
            source=source,
            line=line,
            key=key,
        )


def host_cores(
    host_run: HostRun, needs: SiteNeeds
) -> tuple[dict[int, dict[str, HostPlacement]], list[str], list[HostCpus]]:
    """Each cores value as each side's CPUs on its host, after asking the two hosts' agents for their CPUs,
    the lines that say how they were chosen, and what each host reported; refused (ConfigError naming where
    the axis was given) beyond the least of their CPUs less one."""
    if not needs.cores:
        return {}, [], []
    hosts = {role: host_run.roles[role] for role in ("client", "server")}  # the client host first on a tie
    cpus = {}
    for role, host in hosts.items():
        got = host_run.conn_of(host).call("cpus")
        cpus[role] = HostCpus(host.name, tuple(got["cpus"]), str(got.get("refusal") or ""), str(got.get("root") or ""))
    most, least = check_cores(needs.cores, list(cpus.values()), needs.cores_at)
    out = {
        n: {
            role: host_placement(cpus[role].cpus, n, emulator=role == "client" and bool(needs.emulated))
            for role in hosts
        }
        for n in needs.cores
    }
    lines = [cores_line(most, least)]
    lines += placement_lines({n: {r: (hosts[r].name, p) for r, p in placed.items()} for n, placed in out.items()})
    return out, lines, list(cpus.values())
