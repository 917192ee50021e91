"""The clients of a `clients` trial between two hosts, on the client host (pure: names and `ip` scripts).

Client i runs in a namespace of its own on the client host, with one device over the host's NIC (ipvlan
where the kernel has it, else macvlan: the reasons are those of topology/egress.py) carrying the i-th
address of the inventory's `tunbench_client_addresses`, and a route to the server host: each client is a
machine of its own on the network, and the server sees it at its own address (`{client_addr}`), as a local
trial's server sees its clients on the switch. No emulator (a profile that emulates a link is refused for
this workload between hosts), no translation, nothing in the host's own namespace but the devices' birth.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from tunbench.topology.layout import run_ifname


@dataclass(frozen=True)
class ClientWires:
    """The devices of one trial's clients on a client host."""

    prefix: str  # the controller's run prefix: every device carries it
    nic: str  # the host's NIC whose route leads to the server (each device's lower device)
    server: str  # the server host's underlay address
    gateway: str | None = None  # the next hop to the server from the host's own route (None: on the link)
    kind: str = "ipvlan"  # or "macvlan"

    def __post_init__(self) -> None:
        for name in ("server", *(["gateway"] if self.gateway else [])):
            value = getattr(self, name)
            if ipaddress.ip_address(value).version != 4:
                raise ValueError(f"client {name} {value} is not IPv4 (many clients between hosts are IPv4 only)")
        if self.kind not in ("ipvlan", "macvlan"):
            raise ValueError(f"client device kind {self.kind!r}: ipvlan or macvlan")

    def wire(self, i: int) -> str:
        """Client i's device (index in hex, as the local layout names its clients)."""
        return run_ifname(self.prefix, f"v{i:x}")

    def create_script(self, i: int, netns: str) -> list[str]:
        """In the host's own namespace: client i's device, born in its namespace (never up out there)."""
        mode = "mode l2" if self.kind == "ipvlan" else "mode bridge"
        return [f"link add link {self.nic} name {self.wire(i)} netns {netns} type {self.kind} {mode}"]

    def client_script(self, i: int, address: str) -> list[str]:
        """In client i's namespace: loopback, its address, and its route to the server."""
        w = self.wire(i)
        if ipaddress.ip_address(address).version != 4 or address == self.server:
            raise ValueError(f"client {i}'s address {address}: an IPv4 address other than the server's")
        to_server = (
            [f"route add {self.gateway}/32 dev {w}", f"route add {self.server}/32 via {self.gateway} dev {w}"]
            if self.gateway
            else [f"route add {self.server}/32 dev {w}"]
        )
        return ["link set lo up", f"addr add {address}/32 dev {w}", f"link set {w} up", *to_server]

    def delete_script(self, i: int) -> list[str]:
        """In client i's namespace, at teardown: the device goes now, not when the kernel gets to destroying the
        namespace (the next trial puts the same address on the same NIC)."""
        return [f"link del {self.wire(i)}"]
