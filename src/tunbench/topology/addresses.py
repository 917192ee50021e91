"""The only addresses tunbench ever assigns: RFC 2544 (198.18.0.0/15) and RFC 5180 (2001:2::/48).

198.18.0.0/24 is the underlay between client and server, 198.19.0.0/24 the tunnel's inner network; in IPv6,
2001:2::/64 the underlay and 2001:2:0:1::/64 the inner network (`[topology] underlay` / `overlay`).
Every address lives inside tunbench's own namespaces, so runs never collide on addresses.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

Family = Literal["ipv4", "ipv6"]  # an IP family as scenarios and trial records name it

BENCH_V4 = ipaddress.ip_network("198.18.0.0/15")
BENCH_V6 = ipaddress.ip_network("2001:2::/48")


@dataclass(frozen=True)
class AddressPlan:
    client: str = "198.18.0.1"
    server: str = "198.18.0.2"
    prefixlen: int = 24
    client6: str = "2001:2::1"
    server6: str = "2001:2::2"
    prefixlen6: int = 64
    inner_client: str = "198.19.0.2"
    inner_server: str = "198.19.0.1"
    inner_prefixlen: int = 24
    inner_client6: str = "2001:2:0:1::2"
    inner_server6: str = "2001:2:0:1::1"
    inner_prefixlen6: int = 64

    def __post_init__(self) -> None:
        for name in ("client", "server", "inner_client", "inner_server"):
            assert_bench_address(getattr(self, name))
        for name in ("client6", "server6", "inner_client6", "inner_server6"):
            assert_bench_address(getattr(self, name))


def assert_bench_address(addr: str) -> None:
    """Refuse any address outside the benchmarking ranges: tunbench must touch nothing else."""
    ip = ipaddress.ip_address(addr)
    net = BENCH_V4 if ip.version == 4 else BENCH_V6
    if ip not in net:
        raise ValueError(f"address {addr} is outside {net}: tunbench only uses benchmarking addresses")
