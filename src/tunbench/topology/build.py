"""Topology: client namespace <-> link <-> server namespace, built on one ExitStack so teardown runs in
reverse order whatever happens (error, Ctrl-C, SIGTERM)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType

from tunbench.state import Ledger
from tunbench.topology import sysctl
from tunbench.topology.addresses import AddressPlan
from tunbench.topology.netns import NetNamespace
from tunbench.topology.veth import Endpoint, create_veth

# A link builder joins the two namespaces (veth, or the WAN emulator) and returns a context manager that
# owns whatever it created (or None when the namespaces' deletion removes it all).
LinkBuilder = Callable[["Topology"], contextlib.AbstractContextManager[object] | None]


@dataclass
class TopologySpec:
    mtu: int = 1500
    sysctls: Mapping[str, str] = field(default_factory=dict)
    ipv6: bool = True


class Topology:
    def __init__(
        self,
        ledger: Ledger,
        tag: str,
        spec: TopologySpec,
        link_builder: LinkBuilder | None = None,
        addresses: AddressPlan | None = None,
    ) -> None:
        self.prefix = ledger.prefix
        self.tag = tag
        self.spec = spec
        self.addr = addresses or AddressPlan()
        self._ledger = ledger
        self._stack = contextlib.ExitStack()
        self._link_builder = link_builder or veth_link
        self.client = NetNamespace(f"{ledger.prefix}-{tag}c", ledger)
        self.server = NetNamespace(f"{ledger.prefix}-{tag}s", ledger)
        self.sysctls_applied: dict[str, dict[str, str]] = {}
        self.link: object | None = None  # the link builder may set this (e.g. the emulator, for its counters)

    def ifname(self, suffix: str) -> str:
        """An interface name carrying the run prefix (<= 15 chars, the kernel's limit)."""
        name = f"{self.prefix}-{suffix}"
        if len(name) > 15:
            raise ValueError(f"interface name too long: {name}")
        return name

    def __enter__(self) -> Topology:
        try:
            self._stack.enter_context(self.client)
            self._stack.enter_context(self.server)
            for ns in (self.client, self.server):
                self.sysctls_applied[ns.name] = sysctl.apply(ns.name, self.spec.sysctls)
            link = self._link_builder(self)
            if link is not None:
                self._stack.enter_context(link)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._stack.close()


def veth_link(topo: Topology) -> None:
    a = Endpoint(
        topo.client,
        topo.ifname("vc"),
        topo.addr.client,
        topo.addr.prefixlen,
        topo.addr.client6 if topo.spec.ipv6 else None,
        topo.addr.prefixlen6,
    )
    b = Endpoint(
        topo.server,
        topo.ifname("vs"),
        topo.addr.server,
        topo.addr.prefixlen,
        topo.addr.server6 if topo.spec.ipv6 else None,
        topo.addr.prefixlen6,
    )
    create_veth(a, b, topo.spec.mtu)
    return None
