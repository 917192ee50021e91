"""What the hosts site (sites/hosts.py) brings up for a fleet (`clients`, `storm`) between hosts: the
FleetEnv of a local trial, placed on the run's hosts. The tunnel server runs in the server host's own
namespace (its NIC, its underlay address); the clients are spread over the client hosts by weight
(remote/spread.py), each client in a namespace of its host with the next address of that host's
`tunbench_client_addresses` (remote/clients.py). The same Fleet brings them up, through places answered by
each host's agent: all at once, each host's clients are launched in one request at an instant agreed in
this machine's clock (each agent is given it through its measured clock offset). The readiness probe and
the cost sampling run on the host whose processes they watch.

The server's counters are its host's underlay device's and UDP/TCP counters (a local trial reads its server
namespace's), so anything else on that NIC is counted too. What a local trial measures and this one does
not: the host's total CPU (two hosts)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

from tunbench.errors import ConfigError, TunbenchError
from tunbench.host.cgroup import CpuUsage
from tunbench.host.ledger import Ledger
from tunbench.metrics import core
from tunbench.monitor import stage
from tunbench.monitor.sampler import RoleCost
from tunbench.remote.cap import RemoteCpuCap
from tunbench.remote.place import RemotePlace
from tunbench.remote.protocol import HostLost
from tunbench.remote.spread import Share, spread
from tunbench.remote.topology import HostRun, underlay_address
from tunbench.remote.watch import phase_counters, run_prefixes
from tunbench.sites.base import SampledCost
from tunbench.sites.hosts_ready import HostsReadyProbe, RemoteReadyProbe
from tunbench.sites.hosts_start import HostsFleetPlaces, check_clocks, clock_uncertainty_s
from tunbench.sites.local_fleet import failures_text
from tunbench.topology.build import TopologySpec
from tunbench.topology.layout import HostsLayout
from tunbench.tunnels.fleet import Fleet
from tunbench.tunnels.registry import TunnelRef


def summed(costs: list[RoleCost]) -> RoleCost:
    """Several hosts' costs of one role as one: CPU, cgroup CPU (None if a host had none), peak memory and
    processes added up; the series only when there is one host (the hosts' samples are not simultaneous)."""
    if len(costs) == 1:
        return costs[0]
    cg = [c.cgroup_cpu for c in costs]
    return RoleCost(
        cpu=CpuUsage(sum(c.cpu.user_s for c in costs), sum(c.cpu.sys_s for c in costs)),
        rss_peak_bytes=sum(c.rss_peak_bytes for c in costs),
        processes=sum(c.processes for c in costs),
        cgroup_cpu=None
        if any(u is None for u in cg)
        else CpuUsage(sum(u.user_s for u in cg if u), sum(u.sys_s for u in cg if u)),
    )


def client_pools(shares: list[Share]) -> list[list[str]]:
    """Each share's addresses: its host's first `count` of tunbench_client_addresses; a ConfigError naming
    the host's inventory line when it has fewer."""
    out = []
    for share in shares:
        host = share.host
        pool = host.client_pool(share.count)
        if len(pool) < share.count:
            have = f"has {len(pool)}" if host.client_addresses else "is not set"
            raise ConfigError(
                f"{share.count} clients on {host.name} need as many unused addresses of its network, one per "
                f"client: its tunbench_client_addresses {have} (e.g. 192.0.2.100-192.0.2.163)",
                source=host.source,
                key="tunbench_client_addresses",
            )
        out.append(pool)
    return out


class HostsFleetEnv:
    """`with HostsFleetEnv(...) as env:` as FleetEnv: the client namespaces exist on every client host, the
    server runs, env.probe watches nothing yet; env.fleet.up(...) brings the clients up (sites.base.FleetSetup)."""

    local = False  # the host-wide CPU share and the namespace counters are not read (several hosts)

    def __init__(
        self,
        host_run: HostRun,
        ledger: Ledger,
        tag: str,
        workdir: Path,
        tunnel: TunnelRef,
        topology: TopologySpec,
        clients: int,
        *,
        cpu_cap: bool = False,
        probe_interval_s: float = 0.1,
    ) -> None:
        self.host_run = host_run
        self.want_cap = cpu_cap
        self.ledger = ledger
        self.tag = tag
        self.workdir = workdir
        self.tunnel = tunnel
        self.spec = topology
        self.clients = clients
        self.probe_interval_s = probe_interval_s
        self.shares = spread(clients, host_run.client_hosts)
        self._stack = contextlib.ExitStack()
        self._fleet: Fleet | None = None
        self._places: HostsFleetPlaces | None = None
        self.probe: HostsReadyProbe | None = None
        self._layout: HostsLayout | None = None
        self.metrics: dict[str, float | None] = {}
        self.sysctls_applied: dict[str, str] = {}
        self.net: dict[str, object] = {}
        self.cap: RemoteCpuCap | None = None  # the overload variant's cap on the server, on its host

    @property
    def fleet(self) -> Fleet:
        assert self._fleet is not None
        return self._fleet

    @property
    def layout(self) -> HostsLayout:
        assert self._layout is not None
        return self._layout

    @property
    def places(self) -> HostsFleetPlaces:
        assert self._places is not None
        return self._places

    def host_of(self) -> dict[int, str]:
        """Each client's host, by fleet index."""
        return {i: sh.host.name for sh in self.shares for i in sh.indices}

    def clients_per_host(self) -> dict[str, int]:
        return {sh.host.name: sh.count for sh in self.shares}

    def start_late_s(self) -> dict[str, float]:
        return dict(self.places.skew)

    def lost_clients(self) -> dict[str, str]:
        """The client hosts lost since the set-up (their SSH connection ended), each with what ended it; the
        server's host is not one (losing it fails the trial)."""
        server = self.host_run.roles["server"].name
        out = {}
        for sh in self.shares:
            conn = self.host_run.conn_of(sh.host)
            if conn.lost and sh.host.name != server:
                out[sh.host.name] = conn.lost_why or "the connection to it was lost"
        return out

    def _live(self) -> list[Share]:
        lost = self.lost_clients()
        return [sh for sh in self.shares if sh.host.name not in lost]

    def __enter__(self) -> HostsFleetEnv:
        try:
            self._build()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        t0 = time.monotonic()
        self._stack.close()
        self.metrics[core.TEARDOWN_S.name] = time.monotonic() - t0

    def _close_place(self, place: RemotePlace) -> None:
        with contextlib.suppress(Exception):  # a lost host tears down on its own (EOF)
            place.conn.call("place_close", place=place.key)

    def _open_clients(self, share: Share, pool: list[str]) -> dict[str, Any]:
        """One client host's namespaces (remote/clients.py), in one request to its agent."""
        conn, n = self.host_run.conn_of(share.host), share.count
        tag = f"{self.tag}c"
        try:
            return dict(
                conn.call(
                    "clients_open",
                    wait_s=120.0 + 0.5 * n,
                    tag=tag,
                    link_prefix=self.ledger.prefix,
                    addresses=pool,
                    server=self.host_run.roles["server"].address or "",
                    sysctls=self.spec.namespace_sysctls(),
                )
            )
        except BaseException:
            # given up on (a timeout, the trial's watchdog, Ctrl-C): the agent may still finish it; closing
            # the tag, which it reads after that request, frees the namespaces and addresses (a lost host
            # tears down on its own)
            with contextlib.suppress(TunbenchError):
                conn.call("close_tag", tag=tag, wait_s=120.0 + 0.5 * n)
            raise

    def _build(self) -> None:
        roles, m = self.host_run.roles, self.metrics
        pools = client_pools(self.shares)
        server_addr = roles["server"].address or ""
        prefix = self.ledger.prefix
        sconn = self.host_run.conn("server")
        r = sconn.call("place_open", tag=f"{self.tag}s", netns=None, roles=["server"], link_prefix=prefix)
        server = RemotePlace(sconn, str(r["place"]), str(r["workdir"]), None)
        self._stack.callback(self._close_place, server)
        if self.want_cap:  # before the server starts, as a local cap is
            self.cap = self._stack.enter_context(RemoteCpuCap(server))
        t0 = time.monotonic()
        opened: list[tuple[Share, dict[str, Any] | None, BaseException | None]] = []

        def open_one(k: int) -> tuple[dict[str, Any] | None, BaseException | None]:
            try:
                return self._open_clients(self.shares[k], pools[k]), None
            except BaseException as e:  # every host's outcome is kept: what opened is closed below
                return None, e

        with ThreadPoolExecutor(max(1, len(self.shares))) as pool:
            for share, (c, err) in zip(self.shares, pool.map(open_one, range(len(self.shares))), strict=True):
                opened.append((share, c, err))
        places: list[RemotePlace] = []
        namespaces: list[str] = []
        for share, c, _ in opened:
            if c is None:
                continue
            conn = self.host_run.conn_of(share.host)
            mine = [
                RemotePlace(conn, str(k), str(c["workdir"]), str(ns))
                for k, ns in zip(c["places"], c["netns"], strict=True)
            ]
            for place in mine:  # closed in reverse: a host's first client's place owns its namespaces, last
                self._stack.callback(self._close_place, place)
            places += mine
            namespaces += [str(ns) for ns in c["netns"]]
        if errors := [e for _, _, e in opened if e is not None]:
            raise errors[0]
        m[core.TOPOLOGY_SETUP_S.name] = time.monotonic() - t0
        first = opened[0][1]
        assert first is not None
        self.sysctls_applied = dict(first["sysctls"])
        self.net = {
            "clients": {
                **first["device"],
                "addresses": ", ".join(f"{p[0]}-{p[-1]}" for p in pools),
                "hosts": {sh.host.name: sh.count for sh in self.shares},
            }
        }
        flat = [a for p in pools for a in p]
        self._layout = HostsLayout(
            prefix,
            self.tag,
            self.clients,
            mtu=self.spec.mtu,
            server_addr=server_addr,
            pool=tuple(flat),
            namespaces=tuple(namespaces),
        )
        self._places = HostsFleetPlaces(server, places)
        fleet = Fleet(self.tunnel, self._layout, self.ledger, self.workdir, {}, places=self._places)
        self._fleet = self._stack.enter_context(fleet)
        m[core.KEYS_S.name] = fleet.keys_s
        fleet.start_server()
        m[core.SETUP_S.name] = fleet.server_up_s
        if self.cap is not None:
            self.cap.add(fleet.pids("server"))
        address = fleet.steps.render(fleet.multi.probe_address, fleet.vars, "multi.probe_address")
        probes: dict[str, tuple[RemoteReadyProbe, set[int]]] = {}
        try:
            for sh in self.shares:
                conn = self.host_run.conn_of(sh.host)
                ns = {i: namespaces[i - 1] for i in sh.indices}
                probes[sh.host.name] = (RemoteReadyProbe(conn, ns, address, self.probe_interval_s), set(sh.indices))
        finally:
            self.probe = HostsReadyProbe(probes)
            self._stack.callback(self.probe.close)

    def start_lead_s(self, tolerance_s: float) -> float:
        """Before a coordinated start: each client host's clock offset measured again (the run may be
        hours old) and checked (check_clocks); the lead to give the agents: time for the requests to reach
        every host, with a margin."""
        hosts = [sh.host for sh in self._live()]
        clocks = check_clocks(self.host_run, hosts, tolerance_s, measure=True)
        return 0.2 + 4.0 * max(k.rtt_s for k in clocks)

    def clock_uncertainty_s(self) -> float:
        return clock_uncertainty_s(self.host_run, [sh.host for sh in self._live()])

    def counters(
        self, metrics: dict[str, float | None], key_prefix: str = ""
    ) -> contextlib.AbstractContextManager[None]:
        """The server host's counters over a phase, as a local trial reads its server namespace's: the device
        that holds the server's underlay address and the host's UDP/TCP counters, read by its agent at the
        phase's edges (remote/watch.py phase_counters, the control connection's share taken off), as
        `{key_prefix}counters.server.*`. The client hosts' are not read, as a local trial does not read its
        N client namespaces."""
        server = self.host_run.roles["server"]
        conn = self.host_run.conn_of(server)
        exclude = run_prefixes(list(self.host_run.conns.values()), self.ledger.prefix)
        address = underlay_address(server, self.host_run.underlay)
        return phase_counters(conn, address, "server", metrics, exclude, key_prefix)

    @contextlib.contextmanager
    def sampling(self) -> Iterator[SampledCost]:
        """The server's cost per process on the server host, each client host's cgroup total there, each
        sampled on its host and moved onto this machine's clock; `results["clients"]` sums the hosts. A client
        host lost before or during the phase has no figures (its clients are lost: lost_clients). With them,
        what each host's agent read for the saturated stage (the server's threads at every tick, the clients'
        at the phase's edges, each host's CPUs), judged per host over the phase (stage.fleet_saturation)."""
        out = SampledCost()
        fleet = self.fleet
        server = self.places.server
        firsts = {sh.host.name: self.places.client(sh.first) for sh in self._live()}
        started: list[tuple[str, RemotePlace, str]] = []
        try:
            daemon = [fleet.server] if fleet.server else []
            started.append(("server", server, server.sample_start("server", daemon, threads=True)))
            for name, place in firsts.items():
                with contextlib.suppress(HostLost):
                    started.append((name, place, place.sample_start("clients", [], cgroup_only=True, threads=True)))
        except BaseException:
            for _, place, key in started:
                place.sample_abandon(key)
            raise
        t0 = time.monotonic()  # the workload's phase clock starts right after: the series' origin
        try:
            yield out
        except BaseException:
            for _, place, key in started:
                place.sample_abandon(key)
            raise
        out.wall_s = time.monotonic() - t0
        stopping = list(started)
        try:
            while stopping:  # each one stopped whatever happens to another
                name, place, key = stopping.pop(0)
                if name == "server":
                    out.results["server"] = place.sample_stop(key, t0)
                    continue
                with contextlib.suppress(HostLost):  # lost during the phase: its clients are lost
                    out.per_host[name] = place.sample_stop(key, t0)
        finally:
            for _, place, key in stopping:
                place.sample_abandon(key)
        if out.per_host:
            out.results["clients"] = summed(list(out.per_host.values()))
        hosts = [sh.host.name for sh in self.shares if sh.count]
        out.stage, out.stage_params = stage.fleet_saturation(
            out.results.get("server"),
            self.host_run.roles["server"].name,
            out.per_host,
            hosts,
            self.lost_clients(),
            (0.0, out.wall_s),
        )

    def recorded(self) -> dict[str, object]:
        """What the trial's params record about the set-up, once it is up: the sysctls applied and the hosts'
        network (as a pair trial's `net`)."""
        return {"sysctls": self.sysctls_applied, "net": self.net}

    def failures_text(self, errors: dict[int, str], limit: int = 3) -> str:
        return failures_text(self.fleet, errors, limit)
