"""Names, addresses and MACs of a multi-client topology (pure).

Underlay: 198.18.0.0/16 on the switch (server 198.18.0.1, client i at 198.18.0.1 + i, i = 1..65533).
Inner (tunnel) network: 198.19.0.0/16 (server 198.19.0.1, client i at 198.19.0.1 + i). Both are inside
the benchmarking range 198.18.0.0/15 and do not overlap, so the tunnel's /16 never shadows the underlay.

Names carry the run prefix (`tb<6 hex>-`): namespaces `tb3fa91c-t4-c11` (trial 4, client 0x11), and
interfaces within IFNAMSIZ (15): `tb3fa91c-c11` (client veth), `tb3fa91c-b11` (its bridge port),
`tb3fa91c-t11` (client tunnel device; wireguard-go's UAPI socket is named after it, so it is unique per
run). The client index is written in hex: 5 hex digits fit, far beyond the address plan's limit.

With an emulated WAN profile the emulator sits on the server's uplink, so every client shares one
bottleneck: the switch port then leads to a gateway namespace (`...-gw`, 198.18.255.254, the server's MAC),
which routes the server's address over tunbench-link's TUN pair to the server namespace, where the server
keeps 198.18.0.1 (a /32 on its TUN device, with the underlay /16 routed back through it).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from tunbench.topology.addresses import assert_bench_address

UNDERLAY = ipaddress.IPv4Network("198.18.0.0/16")
INNER = ipaddress.IPv4Network("198.19.0.0/16")
MAX_CLIENTS = 4000  # well below the /16 (65533) and the 5 hex digits of a name; bounded by memory anyway
IFNAMSIZ = 15


def _nth(net: ipaddress.IPv4Network, n: int) -> str:
    addr = net.network_address + n
    if addr not in net or addr == net.broadcast_address or n <= 0:
        raise ValueError(f"address #{n} is outside {net}")
    return str(addr)


def run_ifname(prefix: str, suffix: str) -> str:
    """An interface name carrying the run prefix, within the kernel's limit (IFNAMSIZ - 1 = 15 characters)."""
    name = f"{prefix}-{suffix}"
    if len(name) > IFNAMSIZ:
        raise ValueError(f"interface name too long: {name}")
    return name


def client_addr(i: int) -> str:
    """Underlay address of client i (1-based): 198.18.0.2, ... 198.18.1.0, ..."""
    return _nth(UNDERLAY, 1 + i)


def client_inner(i: int) -> str:
    return _nth(INNER, 1 + i)


def client_mac(i: int) -> str:
    """A locally administered unicast MAC per client (02:74:62 + 24-bit index)."""
    return "02:74:62:" + ":".join(f"{(i >> s) & 0xFF:02x}" for s in (16, 8, 0))


SERVER_MAC = "02:74:63:00:00:01"
GATEWAY_ADDR = _nth(UNDERLAY, UNDERLAY.num_addresses - 2)  # 198.18.255.254: clients stay far below it


@dataclass(frozen=True)
class Layout:
    """Everything named in one multi-client trial."""

    prefix: str  # tb + 6 hex
    tag: str  # the trial's tag, e.g. "t4"
    clients: int
    mtu: int = 1500
    prefixlen: int = 16
    server_addr: str = _nth(UNDERLAY, 1)
    inner_server: str = _nth(INNER, 1)
    inner_prefixlen: int = 16
    inner_netmask: str = "255.255.0.0"
    inner_network: str = str(INNER.network_address)
    emulated_uplink: bool = False  # the WAN emulator between the switch and the server (a shared bottleneck)

    def __post_init__(self) -> None:
        if not 1 <= self.clients <= MAX_CLIENTS:
            raise ValueError(f"clients must be between 1 and {MAX_CLIENTS} (got {self.clients})")
        for a in (self.server_addr, self.inner_server, client_addr(self.clients), client_inner(self.clients)):
            assert_bench_address(a)
        self.ifname("c", self.clients)  # every name fits

    # ---- names ---------------------------------------------------------------------------------------
    def ifname(self, role: str, i: int | None = None) -> str:
        return run_ifname(self.prefix, role + (f"{i:x}" if i is not None else ""))

    def ns(self, role: str) -> str:
        return f"{self.prefix}-{self.tag}-{role}"

    @property
    def bridge_ns(self) -> str:
        return self.ns("sw")

    @property
    def server_ns(self) -> str:
        return self.ns("s")

    def client_ns(self, i: int) -> str:
        return self.ns(f"c{i:x}")

    @property
    def bridge(self) -> str:
        return self.ifname("br")

    @property
    def server_if(self) -> str:
        return self.ifname("s")

    @property
    def server_port(self) -> str:  # the server's port on the bridge
        return self.ifname("bs")

    def client_if(self, i: int) -> str:
        return self.ifname("c", i)

    def client_port(self, i: int) -> str:
        return self.ifname("b", i)

    def client_dev(self, i: int) -> str:
        return self.ifname("t", i)

    @property
    def server_dev(self) -> str:
        return self.ifname("ts")

    @property
    def gateway_ns(self) -> str:
        return self.ns("gw")

    @property
    def uplink_dev_gateway(self) -> str:  # tunbench-link's TUN device on the switch side
        return self.ifname("lg")

    @property
    def uplink_dev_server(self) -> str:  # ... and on the server side
        return self.ifname("ls")

    @property
    def uplink_ns(self) -> str:
        """The namespace whose veth is plugged into the switch for the server: the server's, or the gateway's."""
        return self.gateway_ns if self.emulated_uplink else self.server_ns

    def indices(self) -> range:
        return range(1, self.clients + 1)

    def client_address(self, i: int) -> str:
        """Client i's underlay address (its `{client_addr}`)."""
        return client_addr(i)

    def all_namespaces(self) -> list[str]:
        gateway = [self.gateway_ns] if self.emulated_uplink else []
        return [self.bridge_ns, *gateway, self.server_ns, *(self.client_ns(i) for i in self.indices())]

    # ---- ip -batch scripts (pure, tested) --------------------------------------------------------------
    def bridge_script(self) -> list[str]:
        lines = [
            "link set lo up",
            f"link add {self.bridge} type bridge stp_state 0 mcast_snooping 0",
            f"link set {self.bridge} addrgenmode none",
            f"link set {self.bridge} mtu {self.mtu} up",
            f"link set {self.server_port} addrgenmode none",
            f"link set {self.server_port} mtu {self.mtu} master {self.bridge} up",
        ]
        for i in self.indices():
            p = self.client_port(i)
            lines.append(f"link set {p} addrgenmode none")
            lines.append(f"link set {p} mtu {self.mtu} master {self.bridge} up")
        return lines

    def server_script(self) -> list[str]:
        if self.emulated_uplink:
            return ["link set lo up"]  # its only link is the emulator's TUN device (uplink_server_script)
        return self._uplink_script(self.server_addr)

    def gateway_script(self) -> list[str]:
        """The gateway namespace (emulated uplink only): the switch port, the clients' neighbours."""
        return self._uplink_script(GATEWAY_ADDR)

    def uplink_gateway_script(self) -> list[str]:
        """Once the emulator's TUN devices exist: the server's address is routed through the emulator."""
        g = self.uplink_dev_gateway
        return [f"link set {g} mtu {self.mtu} up", f"route add {self.server_addr}/32 dev {g}"]

    def uplink_server_script(self) -> list[str]:
        d = self.uplink_dev_server
        return [
            f"addr add {self.server_addr}/32 dev {d}",
            f"link set {d} mtu {self.mtu} up",
            f"route add {UNDERLAY} dev {d} src {self.server_addr}",
        ]

    def _uplink_script(self, addr: str) -> list[str]:
        s = self.server_if
        lines = [
            "link set lo up",
            f"link add {s} address {SERVER_MAC} type veth peer name {self.server_port} netns {self.bridge_ns}",
            f"link set {s} addrgenmode none",
            f"addr add {addr}/{self.prefixlen} dev {s}",
            f"link set {s} mtu {self.mtu} up",
        ]
        # permanent neighbours: no ARP storm, and (since Linux 4.19) not counted against the host-wide
        # neighbour table limit (gc_thresh3, 1024 by default, not settable inside a namespace)
        lines += [
            f"neigh replace {client_addr(i)} lladdr {client_mac(i)} dev {s} nud permanent" for i in self.indices()
        ]
        return lines

    def client_script(self, i: int) -> list[str]:
        c = self.client_if(i)
        return [
            "link set lo up",
            f"link add {c} address {client_mac(i)} type veth peer name {self.client_port(i)} netns {self.bridge_ns}",
            f"link set {c} addrgenmode none",
            f"addr add {client_addr(i)}/{self.prefixlen} dev {c}",
            f"link set {c} mtu {self.mtu} up",
            f"neigh replace {self.server_addr} lladdr {SERVER_MAC} dev {c} nud permanent",
        ]


@dataclass(frozen=True)
class HostsLayout(Layout):
    """The clients of a trial between two hosts (sites/hosts_fleet.py): the server is the server host itself (its
    own namespace, its underlay address `server_addr`); client i is the namespace `namespaces[i - 1]` of the
    client host, whose device on that host's NIC has the address `pool[i - 1]` (the inventory's
    tunbench_client_addresses). The inner addresses stay tunbench's own, as in a local trial."""

    pool: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= self.clients <= min(len(self.pool), MAX_CLIENTS):
            raise ValueError(f"{self.clients} clients need as many addresses (the pool has {len(self.pool)})")
        if len(self.namespaces) < self.clients:
            raise ValueError(f"{self.clients} clients need as many namespaces (got {len(self.namespaces)})")
        if self.server_addr in self.pool[: self.clients]:
            raise ValueError(f"the server's address {self.server_addr} is in the clients' pool")
        for a in (self.inner_server, client_inner(self.clients)):
            assert_bench_address(a)
        self.ifname("v", self.clients)  # every name fits

    @property
    def server_ns(self) -> str:
        return ""  # the server host's own

    def client_ns(self, i: int) -> str:
        return self.namespaces[i - 1]

    def client_address(self, i: int) -> str:
        return self.pool[i - 1]

    def all_namespaces(self) -> list[str]:
        return list(self.namespaces[: self.clients])
