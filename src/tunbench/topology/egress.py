"""An emulated link on a client host's egress, for two-host runs (pure: names, addresses, `ip` scripts).

The tunnel's client runs in a namespace of its own on the client host, with a second underlay address of
that host (the inventory's `tunbench_egress_address`) on an ipvlan (or macvlan) device over the NIC that
carries the host's route to the server. tunbench-link's two TUN devices are in that same namespace, and policy
routing makes every packet between the tunnel and the wire cross the emulator once:

    up:   tunnel -> (route to the server) -> lc -> tunbench-link a2b -> le -> (table 100) -> ev -> wire
    down: wire -> ev -> (table 101: our address via le) -> tunbench-link b2a -> lc -> local delivery

Nothing is translated: the server sees the client at the egress address, which is the tunnel's own underlay
address (`{client_addr}`), so adapters that name the peer's address work unchanged. The host's own namespace
gets nothing but the device's existence on its NIC (created in our namespace). ipvlan where the kernel has it,
because it shares the NIC's MAC address (cloud networks drop frames from unknown MACs); else macvlan, with a
MAC of its own (bare metal and bridges accept it). The namespace answers ARP for the egress address by proxy
(a proxy entry for that one address: for packets from the wire it is routed through the emulator, not delivered
locally), and the local-table rule moves behind the two `iif` rules.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from tunbench.topology.layout import run_ifname

UP_TABLE = 100  # packets leaving the emulator (iif le): to the wire
DOWN_TABLE = 101  # packets from the wire (iif the ipvlan device): into the emulator
LOCAL_PREF = 1000  # the local table's rule, moved behind ours


@dataclass(frozen=True)
class EgressLayout:
    """One trial's egress namespace on a client host."""

    prefix: str  # the controller's run prefix: every device carries it
    netns: str  # the namespace (the agent's own name for it)
    nic: str  # the host's NIC carrying its underlay address (the ipvlan device's lower device)
    address: str  # the egress address: the tunnel client's underlay address
    server: str  # the server host's underlay address
    gateway: str | None = None  # the next hop to the server from the host's own route (None: on the link)
    mtu: int = 1500
    kind: str = "ipvlan"  # or "macvlan"

    def __post_init__(self) -> None:
        for name in ("address", "server", *(["gateway"] if self.gateway else [])):
            value = getattr(self, name)
            if ipaddress.ip_address(value).version != 4:
                raise ValueError(f"egress {name} {value} is not IPv4 (an emulated link between hosts is IPv4 only)")
        if self.kind not in ("ipvlan", "macvlan"):
            raise ValueError(f"egress device kind {self.kind!r}: ipvlan or macvlan")
        if self.address == self.server:
            raise ValueError(f"the egress address {self.address} is the server's")

    def ifname(self, suffix: str) -> str:
        return run_ifname(self.prefix, suffix)

    @property
    def wire(self) -> str:  # the ipvlan or macvlan device
        return self.ifname("ev")

    @property
    def tunnel_side(self) -> str:  # tunbench-link's TUN device the tunnel's packets enter (its side a)
        return self.ifname("lc")

    @property
    def wire_side(self) -> str:  # ... and the one facing the wire (side b)
        return self.ifname("le")

    def create_script(self) -> list[str]:
        """In the host's own namespace: the device, born in our namespace (never up out there)."""
        mode = "mode l2" if self.kind == "ipvlan" else "mode bridge"
        return [f"link add link {self.nic} name {self.wire} netns {self.netns} type {self.kind} {mode}"]

    def wire_script(self) -> list[str]:
        """In our namespace, before the emulator starts: loopback, the egress address on the device, and an
        ARP proxy entry for that one address (answered at once, not after the default random proxy delay
        of up to 0.8 s): the wire learns our MAC for the egress address and for nothing else."""
        return [
            "link set lo up",
            f"addr add {self.address}/32 dev {self.wire}",
            f"neigh add proxy {self.address} dev {self.wire}",
            f"ntable change name arp_cache dev {self.wire} proxy_delay 0",
            f"link set {self.wire} up",
        ]

    def delete_script(self) -> list[str]:
        """In our namespace, at teardown: the device goes now (a namespace's own devices go only when the
        kernel gets to destroying it, and the next trial puts the same address on the same NIC)."""
        return [f"link del {self.wire}"]

    def route_script(self) -> list[str]:
        """In our namespace, once tunbench-link's TUN devices exist: the two directions through it."""
        # a routed server: its next hop is on the link (a route of its own in the table, so the kernel accepts it
        # as a gateway); else the server itself is
        to_wire = (
            [
                f"route add {self.gateway}/32 dev {self.wire} table {UP_TABLE}",
                f"route add {self.server}/32 via {self.gateway} dev {self.wire} table {UP_TABLE}",
            ]
            if self.gateway
            else [f"route add {self.server}/32 dev {self.wire} table {UP_TABLE}"]
        )
        return [
            f"link set {self.tunnel_side} mtu {self.mtu} up",
            f"link set {self.wire_side} mtu {self.mtu} up",
            f"route add {self.server}/32 dev {self.tunnel_side} src {self.address}",
            f"rule add pref 10 iif {self.wire_side} lookup {UP_TABLE}",
            *to_wire,
            f"rule add pref 20 iif {self.wire} lookup {DOWN_TABLE}",
            f"route add {self.address}/32 dev {self.wire_side} table {DOWN_TABLE}",
            f"rule add pref {LOCAL_PREF} lookup local",
            "rule del pref 0",
        ]

    def sysctls(self) -> dict[str, str]:
        """Set before any device exists, namespace-wide (`all`, which the kernel ORs with each device's own, and
        `default` for rp_filter, which each new device copies): forwarding between the emulator and the wire
        (which also makes the proxy entry of `wire_script` answer); packets from the emulator carry our own
        address as their source (accept_local). No proxy_arp: it would answer for every address routed
        elsewhere, the server's too. Early demux is off: it would hand a TCP or UDP packet from the wire to
        the tunnel's socket before routing (the address is ours), and the kernel then drops it instead of
        forwarding it into the emulator."""
        return {
            "net.ipv4.ip_forward": "1",
            "net.ipv4.conf.all.rp_filter": "0",
            "net.ipv4.conf.default.rp_filter": "0",
            "net.ipv4.conf.all.accept_local": "1",
            "net.ipv4.ip_early_demux": "0",
            "net.ipv4.tcp_early_demux": "0",
            "net.ipv4.udp_early_demux": "0",
        }
