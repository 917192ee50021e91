"""What the hosts site (sites/hosts.py) brings up for a `clients` trial between two hosts: the FleetEnv of a
local trial, placed on the run's hosts. The tunnel server runs in the server host's own namespace (its NIC,
its underlay address); client i in a namespace of the client host with the i-th address of that host's
`tunbench_client_addresses` (remote/clients.py). The same Fleet brings them up, through places answered by
each host's agent; the readiness probe and the cost sampling run on the host whose processes they watch.

What a local trial measures and this one does not: the namespaces' counters (no switch here: the hosts' NICs
carry other traffic too) and the host's total CPU (two hosts)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from tunbench.errors import ConfigError, TunbenchError
from tunbench.host.ledger import Ledger
from tunbench.monitor.sampler import RoleCost
from tunbench.remote.connection import AgentConnection
from tunbench.remote.hosts import HostRun
from tunbench.remote.place import RemotePlace
from tunbench.sites.local_fleet import failures_text
from tunbench.topology.build import TopologySpec
from tunbench.topology.layout import HostsLayout
from tunbench.tunnels.fleet import Fleet
from tunbench.tunnels.registry import TunnelRef


@dataclass
class SampledCost:
    """The sampling of one traffic phase, as a local Sampler reports it: per role, and its wall time."""

    results: dict[str, RoleCost] = field(default_factory=dict)
    wall_s: float = 0.0


class HostsFleetPlaces:
    def __init__(self, server: RemotePlace, clients: list[RemotePlace]) -> None:
        self.server = server
        self._clients = clients

    def client(self, i: int) -> RemotePlace:
        return self._clients[i - 1]


class RemoteReadyProbe:
    """tunnels' readiness probe (host/ready.py) run by the client host's agent; `ready_at` on this machine's
    monotonic clock."""

    def __init__(self, conn: AgentConnection, namespaces: dict[int, str], address: str, interval_s: float) -> None:
        self._conn = conn
        self._key = str(conn.call("probe_open", namespaces=namespaces, address=address, interval_s=interval_s))
        self.ready_at: dict[int, float] = {}

    def watch(self, keys: Iterable[int]) -> None:
        keys = list(keys)
        for k in keys:
            self.ready_at.pop(k, None)
        self._conn.call("probe_watch", probe=self._key, keys=keys)

    def wait(self, keys: Iterable[int], deadline: float) -> bool:
        keys = list(keys)
        timeout = max(0.0, deadline - time.monotonic())
        got = self._conn.call("probe_wait", wait_s=timeout + 30.0, probe=self._key, keys=keys, timeout_s=timeout)
        assert self._conn.clock is not None
        self.ready_at.update({int(k): self._conn.clock.to_local_mono(float(t)) for k, t in got.items()})
        return set(keys) <= self.ready_at.keys()

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a lost host closed it on its own
            self._conn.call("probe_close", probe=self._key)


def client_pool(host_run: HostRun, clients: int) -> list[str]:
    """The client host's first `clients` addresses of tunbench_client_addresses; a ConfigError naming its
    inventory line when it has fewer."""
    host = host_run.roles["client"]
    pool = host.client_pool(clients)
    if len(pool) < clients:
        have = f"has {len(pool)}" if host.client_addresses else "is not set"
        raise ConfigError(
            f"{clients} clients between two hosts need as many unused addresses of {host.name}'s network, one "
            f"per client: its tunbench_client_addresses {have} (e.g. 192.0.2.100-192.0.2.163)",
            source=host.source,
            key="tunbench_client_addresses",
        )
    return pool


class HostsFleetEnv:
    """`with HostsFleetEnv(...) as env:` as FleetEnv: the client namespaces exist, the server runs, env.probe
    watches nothing yet; env.fleet.up(...) brings the clients up."""

    local = False  # the host-wide CPU share and the namespace counters are not read (two hosts)

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
        probe_interval_s: float = 0.1,
    ) -> None:
        self.host_run = host_run
        self.ledger = ledger
        self.tag = tag
        self.workdir = workdir
        self.tunnel = tunnel
        self.spec = topology
        self.clients = clients
        self.probe_interval_s = probe_interval_s
        self._stack = contextlib.ExitStack()
        self._fleet: Fleet | None = None
        self.probe: RemoteReadyProbe | None = None
        self._layout: HostsLayout | None = None
        self.metrics: dict[str, float | None] = {}
        self.sysctls_applied: dict[str, str] = {}
        self.net: dict[str, object] = {}

    @property
    def fleet(self) -> Fleet:
        assert self._fleet is not None
        return self._fleet

    @property
    def layout(self) -> HostsLayout:
        assert self._layout is not None
        return self._layout

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
        self.metrics["clients.teardown_s"] = time.monotonic() - t0

    def _close_place(self, place: RemotePlace) -> None:
        with contextlib.suppress(Exception):  # a lost host tears down on its own (EOF)
            place.conn.call("place_close", place=place.key)

    def _build(self) -> None:
        roles, n, m = self.host_run.roles, self.clients, self.metrics
        pool = client_pool(self.host_run, n)
        server_addr = roles["server"].address or ""
        prefix = self.ledger.prefix
        sconn, cconn = self.host_run.conn("server"), self.host_run.conn("client")
        r = sconn.call("place_open", tag=f"{self.tag}s", netns=None, roles=["server"], link_prefix=prefix)
        server = RemotePlace(sconn, str(r["place"]), str(r["workdir"]), None)
        self._stack.callback(self._close_place, server)
        t0 = time.monotonic()
        try:
            c = cconn.call(
                "clients_open",
                wait_s=120.0 + 0.5 * n,
                tag=f"{self.tag}c",
                link_prefix=prefix,
                addresses=pool,
                server=server_addr,
                sysctls=self.spec.namespace_sysctls(),
            )
        except BaseException:
            # given up on (a timeout, the trial's watchdog, Ctrl-C): the agent may still finish it; closing
            # the tag, which it reads after that request, frees the namespaces and addresses (a lost host
            # tears down on its own)
            with contextlib.suppress(TunbenchError):
                cconn.call("close_tag", tag=f"{self.tag}c", wait_s=120.0 + 0.5 * n)
            raise
        places = [
            RemotePlace(cconn, str(k), str(c["workdir"]), str(ns))
            for k, ns in zip(c["places"], c["netns"], strict=True)
        ]
        for place in places:  # closed in reverse: the first client's place owns the namespaces, it goes last
            self._stack.callback(self._close_place, place)
        m["clients.topology_setup_s"] = time.monotonic() - t0
        self.sysctls_applied = dict(c["sysctls"])
        self.net = {"clients": {**c["device"], "addresses": f"{pool[0]}-{pool[-1]}"}}
        self._layout = HostsLayout(
            prefix,
            self.tag,
            n,
            mtu=self.spec.mtu,
            server_addr=server_addr,
            pool=tuple(pool),
            namespaces=tuple(c["netns"]),
        )
        fleet = Fleet(self.tunnel, self._layout, self.ledger, self.workdir, {}, places=HostsFleetPlaces(server, places))
        self._fleet = self._stack.enter_context(fleet)
        m["clients.keys_s"] = fleet.keys_s
        fleet.start_server()
        m["setup_s"] = fleet.server_up_s
        address = fleet.steps.render(fleet.multi.probe_address, fleet.vars, "multi.probe_address")
        self.probe = RemoteReadyProbe(cconn, dict(enumerate(c["netns"], start=1)), address, self.probe_interval_s)
        self._stack.callback(self.probe.close)

    def counters(
        self, metrics: dict[str, float | None], key_prefix: str = ""
    ) -> contextlib.AbstractContextManager[None]:
        """Not read between hosts (their NICs carry other traffic too)."""
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def sampling(self) -> Iterator[SampledCost]:
        """The server's cost per process on the server host, the clients' cgroup totals on the client host,
        each sampled there and moved onto this machine's clock."""
        out = SampledCost()
        fleet = self.fleet
        server, first = fleet.places.server, fleet.places.client(1)
        assert isinstance(server, RemotePlace) and isinstance(first, RemotePlace)
        s_key = server.sample_start("server", [fleet.server] if fleet.server else [])
        try:
            c_key = first.sample_start("clients", [], cgroup_only=True)
        except BaseException:
            server.sample_abandon(s_key)
            raise
        t0 = time.monotonic()  # the workload's phase clock starts right after: the series' origin
        try:
            yield out
        except BaseException:
            server.sample_abandon(s_key)
            first.sample_abandon(c_key)
            raise
        out.wall_s = time.monotonic() - t0
        try:
            out.results["server"] = server.sample_stop(s_key, t0)
        finally:
            out.results["clients"] = first.sample_stop(c_key, t0)

    def recorded(self) -> dict[str, object]:
        """What the trial's params record about the set-up, once it is up: the sysctls applied and the hosts'
        network (as a pair trial's `net`)."""
        return {"sysctls": self.sysctls_applied, "net": self.net}

    def failures_text(self, errors: dict[int, str], limit: int = 3) -> str:
        return failures_text(self.fleet, errors, limit)
