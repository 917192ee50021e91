"""A run's hosts: one agent connection per host, opened once for the run, and the per-trial topology that
places the client and server roles on them.

Underlay addresses come from the inventory (the hosts' real interfaces); the tunnel's inner addresses stay
tunbench's own. A role runs in its host's own namespace, next to the real NIC; with an emulated profile the
client runs in a namespace of its host behind the emulator, from the host's egress address (egress.py);
one host with both roles holds them in two namespaces, as a local run does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from tunbench.errors import ConfigError, TrialError, TunbenchError
from tunbench.host.ledger import Ledger
from tunbench.link.profile import Profile
from tunbench.remote.connection import AgentConnection
from tunbench.remote.inventory import Host, Inventory
from tunbench.remote.place import RemotePlace
from tunbench.remote.watch import CountRequest
from tunbench.topology.addresses import AddressPlan, Family, assert_bench_address
from tunbench.topology.build import TopologySpec
from tunbench.topology.layout import run_ifname

ROLES = ("client", "server")


@dataclass(frozen=True)
class HostAddressPlan(AddressPlan):
    """The underlay addresses are the hosts' own (from the inventory: tunbench_address, tunbench_address6; ""
    where a host has none, and then the run's family is the other one); only the inner ones are tunbench's."""

    def __post_init__(self) -> None:
        for name in ("inner_client", "inner_server"):
            assert_bench_address(getattr(self, name))


def _enter(conn: AgentConnection) -> BaseException | None:
    try:
        conn.__enter__()
    except BaseException as e:  # re-raised by the caller, after the other connections are closed
        return e
    return None


def underlay_address(host: Host, underlay: Family) -> str | None:
    """The host's underlay address of the run's family (the inventory's tunbench_address or
    tunbench_address6), or None."""
    return host.address6 if underlay == "ipv6" else host.address


def role_hosts(inv: Inventory, underlay: Family = "ipv4") -> dict[str, Host]:
    """The host of each role. One host may carry both: the roles then run in two namespaces of it, joined as
    in a local run (a veth, or the WAN emulator); two hosts need each other's underlay address of the run's
    family (`underlay`)."""
    hosts = {role: inv.for_role(role) for role in ROLES}
    if hosts["client"].name == hosts["server"].name:
        return hosts
    var, family, literal = (
        ("tunbench_address6", "IPv6", "an IPv6 literal")
        if underlay == "ipv6"
        else ("tunbench_address", "IPv4", "an IPv4 literal")
    )
    for role, h in hosts.items():
        if not underlay_address(h, underlay):
            raise ConfigError(
                f"host {h.name} ({role}) has no {family} underlay address: set {var}= (the address the other "
                f"host reaches it on) or {literal} in ansible_host",
                source=h.source,
                key=var,
            )
    return hosts


def check_client_address(host: Host, emulated: bool, underlay: Family) -> None:
    """A client host other than the first (which the run's preflight checked) needs what the first does
    between two hosts: its underlay address of the run's family and, with an emulated profile, its egress
    address; a TrialError naming the host and the variable otherwise."""
    if emulated and not host.egress_address:
        raise TrialError(
            f"profile emulates a link, which between two hosts runs on the client host's egress: set "
            f"tunbench_egress_address= on host {host.name} (docs/multi-host.md)"
        )
    if not underlay_address(host, underlay):
        var = "tunbench_address6" if underlay == "ipv6" else "tunbench_address"
        raise TrialError(f"client host {host.name} has no {underlay} underlay address: set {var}= on it")


class HostRun:
    """`with HostRun(inventory, ledger, logdir) as hosts:` every host has an agent until the block ends.
    `underlay`: the run's underlay family, which of each host's addresses the tunnels use."""

    def __init__(
        self, inventory: Inventory, ledger: Ledger, logdir: Path, underlay: Family = "ipv4", *, all_clients: bool = True
    ) -> None:
        """`all_clients`: connect to every client host (a fleet or `connect` spreads over them); False: only
        the first, the one-client workloads' (another client host, even an unreachable one, is not used)."""
        self.inventory = inventory
        self.underlay = underlay
        self.roles = role_hosts(inventory, underlay)
        self.client_hosts: tuple[Host, ...] = inventory.clients() if all_clients else (self.roles["client"],)
        self._ledger = ledger
        self._logdir = logdir
        self._stack = contextlib.ExitStack()
        self.conns: dict[str, AgentConnection] = {}
        self.count_request: CountRequest | None = None  # what the next window counts on the hosts

    def __enter__(self) -> HostRun:
        """Connect to every host at once (docs/benchmarks/multi-host.md: 2.6 s one after the other, 1.6 s at
        once for two)."""
        # one connection per host, whatever its roles
        distinct = {h.name: h for h in (*self.roles.values(), *self.client_hosts)}
        conns = [AgentConnection(h, self._ledger, self._logdir, self.inventory.ssh_config) for h in distinct.values()]
        with ThreadPoolExecutor(max_workers=len(conns)) as pool:
            results = list(pool.map(_enter, conns))
        for conn, err in zip(conns, results, strict=True):
            if err is None:
                self.conns[conn.name] = conn
                self._stack.callback(conn.close)
        errors = [e for e in results if e is not None]
        if errors:
            self._stack.close()
            raise errors[0]
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._stack.close()

    def conn(self, role: str) -> AgentConnection:
        return self.conns[self.roles[role].name]

    def conn_of(self, host: Host) -> AgentConnection:
        return self.conns[host.name]

    def provenance(self) -> dict[str, Any]:
        """Per host: its roles, the agent's version, the clock offset and its uncertainty, and the host's
        kernel, CPU, governor and the NIC carrying its underlay address (driver, offloads, MTU)."""
        out: dict[str, Any] = {}
        placed = [*self.roles.items(), *(("client", h) for h in self.client_hosts)]
        for role, h in placed:
            if h.name in out:  # one host with both roles, or the first client host again
                if role not in out[h.name]["role"]:
                    out[h.name]["role"] = "client, server"
                continue
            conn = self.conns[h.name]
            address = underlay_address(h, self.underlay)
            facts = conn.call("facts", address=address)
            out[h.name] = {
                "role": role,
                "address": address,
                "agent": asdict(conn.info) if conn.info else None,
                "clock": asdict(conn.clock) if conn.clock else None,
                **facts,
            }
        return out

    def tools_missing(self, needs: dict[str, list[str]]) -> list[str]:
        """`needs`: who (a tunnel, a workload) -> the programs it needs on every host; what each host lacks,
        one line per host and need."""
        lines = []
        programs = sorted({p for progs in needs.values() for p in progs})
        for name, conn in self.conns.items():
            have = conn.call("tools", programs=programs)
            for who, progs in needs.items():
                missing = [p for p in progs if not have.get(p)]
                if missing:
                    lines.append(f"{name}: {who} needs {', '.join(missing)}")
        return lines


class HostsTopology:
    """One trial's roles on the run's hosts (tunnels.tunnel.Placed): a place per role, opened on enter and
    closed (processes, cgroup, trial directory, the run's links) on exit. `client`: which client host takes
    the client role (the first, `hosts.roles["client"]`, by default)."""

    def __init__(
        self,
        hosts: HostRun,
        prefix: str,
        tag: str,
        spec: TopologySpec,
        profile: Profile | None = None,
        seed: int = 0,
        *,
        client: Host | None = None,
        cpus: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.hosts = hosts
        self.cpus = dict(cpus or {})  # role -> its side's CPUs on its host (the cores axis, the agent's `cpus=`)
        self.placed: dict[str, dict[str, str]] = {}  # role -> the CPUs its host's cpusets hold, as read back there
        self.profile = profile
        self.seed = seed
        self.hosts_by_role = {"client": client or hosts.roles["client"], "server": hosts.roles["server"]}
        self.shared = self.hosts_by_role["client"].name == self.hosts_by_role["server"].name
        self.link_stats: dict[str, Any] | None = None
        self.prefix = prefix
        self.tag = tag
        self.spec = spec
        self.link = None
        self.sysctls_applied: dict[str, dict[str, str]] = {}
        r = self.hosts_by_role
        if not self.shared and r["client"].name != hosts.roles["client"].name:
            check_client_address(r["client"], self.emulated, hosts.underlay)
        # two hosts: the hosts' own underlay addresses; with an emulated profile the client's is its host's
        # egress address (the emulator's namespace sends from it)
        client_addr = (r["client"].egress_address if self.emulated else None) or r["client"].address or ""
        self.addr: AddressPlan = (
            AddressPlan()
            if self.shared
            else HostAddressPlan(
                client=client_addr,
                server=r["server"].address or "",
                client6=r["client"].address6 or "",
                server6=r["server"].address6 or "",
            )
        )
        self._places: dict[str, RemotePlace] = {}
        self.egress: dict[str, Any] | None = None  # the client host's egress device, with an emulated profile

    def __enter__(self) -> HostsTopology:
        try:
            if self.shared:
                self._open_pair()
                return self
            for role in ROLES:
                if role == "client" and self.emulated:
                    self._open_egress()
                    continue
                conn = self.conn(role)
                r = conn.call(
                    "place_open",
                    tag=f"{self.tag}{role[0]}",
                    netns=None,
                    roles=[role],
                    link_prefix=self.prefix,
                    **self._cpus_arg(role),
                )
                self._places[role] = RemotePlace(conn, str(r["place"]), str(r["workdir"]), None)
                if r.get("cpus"):
                    self.placed[role] = dict(r["cpus"])
        except BaseException:
            self._close()
            raise
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._close()

    @property
    def emulated(self) -> bool:
        return self.profile is not None and self.profile.emulated

    def _cpus_arg(self, role: str) -> dict[str, Any]:
        """The agent's `cpus=` for a role's place when the side is placed (none otherwise: an agent asked
        without it is the same as before the cores axis reached hosts)."""
        return {"cpus": dict(self.cpus[role])} if self.cpus.get(role) else {}

    def _spec_json(self) -> dict[str, Any]:
        """The topology settings as the agent's TopologySpec takes them over the channel."""
        return {**asdict(self.spec), "sysctls": dict(self.spec.sysctls)}

    def _open_egress(self) -> None:
        """Two hosts and an emulated profile: the client runs in a namespace of the client host whose traffic
        to the server crosses tunbench-link, from the host's egress address (remote/egress.py)."""
        assert self.profile is not None
        conn, host = self.conn("client"), self.hosts_by_role["client"]
        r = conn.call(
            "egress_open",
            tag=f"{self.tag}c",
            spec=self._spec_json(),
            profile=self.profile.model_dump(),
            seed=self.seed,
            address=host.egress_address,
            server=self.addr.server,
            link_prefix=self.prefix,
            **self._cpus_arg("client"),
        )
        self.sysctls_applied = {r["netns"]: r["sysctls"]}
        self.egress = r.get("egress")
        self._places["client"] = RemotePlace(conn, str(r["place"]), str(r["workdir"]), str(r["netns"]))
        if r.get("cpus"):
            self.placed["client"] = dict(r["cpus"])

    def _open_pair(self) -> None:
        """Both roles on one host: its agent builds the two namespaces and their link (tunnels' variables then
        name those namespaces and tunbench's own underlay addresses, as in a local run)."""
        conn = self.conn("client")
        spec = self._spec_json()
        profile = self.profile.model_dump() if self.profile is not None and self.profile.emulated else None
        r = conn.call("pair_open", tag=self.tag, spec=spec, profile=profile, seed=self.seed)
        self.addr = AddressPlan(**r["addr"])
        self.sysctls_applied = r["sysctls"]
        for role in ROLES:
            self._places[role] = RemotePlace(conn, r[role]["place"], r["workdir"], r[role]["netns"])

    def _close(self) -> None:
        for role in reversed(ROLES):
            place = self._places.pop(role, None)
            if place is not None:
                with contextlib.suppress(TunbenchError):  # a lost host tears down on its own (EOF)
                    out = place.conn.call("place_close", place=place.key)
                    if out and out.get("link") is not None:
                        self.link_stats = out["link"]

    def clock_skew(self) -> tuple[float, float] | None:
        """(server's wall clock - client's, uncertainty) in seconds, from each host's offset to this machine;
        None when one host carries both roles (one clock)."""
        if self.shared:
            return None
        c, s = self.conn("client").clock, self.conn("server").clock
        assert c is not None and s is not None
        return s.wall_s - c.wall_s, s.uncertainty_s + c.uncertainty_s

    def conn(self, role: str) -> AgentConnection:
        """The agent of the host that takes `role` in this topology."""
        return self.hosts.conn_of(self.hosts_by_role[role])

    def place(self, role: str) -> RemotePlace:
        return self._places[role]

    def ns_name(self, role: str) -> str:
        return self._places[role].netns or ""  # "": the host's own namespace

    def ifname(self, suffix: str) -> str:
        return run_ifname(self.prefix, suffix)

    def effective_settings(self) -> dict[str, Any]:
        """What a trial records as params["net"]: the hosts keep their own settings (provenance has them);
        with an emulated profile, the egress device the client sent through (kind, NIC, next hop)."""
        return {"egress": self.egress} if self.egress else {}
