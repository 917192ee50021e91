"""VethPair: a veth link created directly between two namespaces (never visible in the root namespace)."""

from __future__ import annotations

from dataclasses import dataclass

from pyroute2 import IPRoute
from pyroute2.netlink.rtnl.ifaddrmsg import IFA_F_NODAD

from tunbench.host.netns import NetNamespace


@dataclass(frozen=True)
class Endpoint:
    ns: NetNamespace
    ifname: str
    address: str
    prefixlen: int
    address6: str | None = None
    prefixlen6: int = 64


def configure(ep: Endpoint, mtu: int) -> None:
    """Assign the endpoint's addresses, set the MTU and bring the interface up."""
    with IPRoute(netns=ep.ns.name) as ipr:
        idx = ipr.link_lookup(ifname=ep.ifname)[0]
        ipr.link("set", index=idx, mtu=mtu)
        ipr.addr("add", index=idx, address=ep.address, prefixlen=ep.prefixlen)
        if ep.address6:
            # no duplicate address detection: usable at once (not "tentative" for a second or two)
            ipr.addr("add", index=idx, address=ep.address6, prefixlen=ep.prefixlen6, flags=IFA_F_NODAD)
        ipr.link("set", index=idx, state="up")


def create_veth(a: Endpoint, b: Endpoint, mtu: int) -> None:
    """Create the pair inside a's namespace with its peer born in b's; both go away with the namespaces."""
    with IPRoute(netns=a.ns.name) as ipr:
        ipr.link("add", ifname=a.ifname, kind="veth", peer={"ifname": b.ifname, "net_ns_fd": b.ns.name})
    configure(a, mtu)
    configure(b, mtu)
