"""Topology: client namespace <-> link <-> server namespace, built on one ExitStack so teardown runs in
reverse order whatever happens (error, Ctrl-C, SIGTERM)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

from tunbench.errors import ConfigError
from tunbench.host.ledger import Ledger
from tunbench.host.netns import NetNamespace
from tunbench.topology import settings, sysctl
from tunbench.topology.addresses import AddressPlan
from tunbench.topology.layout import run_ifname
from tunbench.topology.veth import Endpoint, create_veth

# A link builder joins the two namespaces (veth, or the WAN emulator) and returns a context manager that
# owns whatever it created (or None when the namespaces' deletion removes it all).
# Every namespace of a topology: an IPv6 address is usable the moment it is added (the underlay's, and the
# ones tunnels give their devices), instead of "tentative" (unbindable) during duplicate address detection.
NO_DAD = {"net.ipv6.conf.all.accept_dad": "0", "net.ipv6.conf.default.accept_dad": "0"}

LinkBuilder = Callable[["Topology"], contextlib.AbstractContextManager[object] | None]


class EmulatedLink(Protocol):
    """A link between the namespaces that is more than a veth (the WAN emulator): its own devices."""

    def devices(self) -> dict[str, str]:
        """namespace name -> the link's device in it."""
        ...


@dataclass
class TopologySpec:
    mtu: int = 1500
    sysctls: Mapping[str, str] = field(default_factory=dict)
    ipv6: bool = True
    # pinned TCP congestion control for every namespace of the topology (None: inherit the host's)
    congestion_control: str | None = None

    def __post_init__(self) -> None:
        if self.congestion_control is None:
            return
        try:
            settings.check_congestion_control(self.congestion_control)
        except ValueError as e:
            raise ConfigError(str(e), key="congestion_control") from None
        other = self.sysctls.get(settings.CONGESTION_KEY)
        if other is not None and other != self.congestion_control:
            raise ConfigError(
                f"congestion_control = {self.congestion_control!r} contradicts "
                f"[sysctl] {settings.CONGESTION_KEY} = {other!r}",
                key="congestion_control",
            )

    def with_profile(self, mtu: int | None, sysctls: Mapping[str, str], congestion_control: str | None) -> TopologySpec:
        """These settings with a WAN profile's own on top (its MTU, sysctls and congestion control win): the
        one rule by which a trial's namespaces (trial/attempt.py) and `tunbench link shell`'s (link/pair.py)
        get their settings."""
        return TopologySpec(
            mtu=mtu or self.mtu,
            sysctls={**self.sysctls, **sysctls},
            ipv6=self.ipv6,
            congestion_control=congestion_control or self.congestion_control,
        )

    def namespace_sysctls(self) -> dict[str, str]:
        """What every namespace of the topology gets: the sysctls, and the pinned congestion control."""
        out = dict(self.sysctls)
        if self.congestion_control is not None:
            out[settings.CONGESTION_KEY] = self.congestion_control
        return out


class Topology:
    def __init__(
        self,
        ledger: Ledger,
        tag: str,
        spec: TopologySpec,
        link_builder: LinkBuilder | None = None,
        addresses: AddressPlan | None = None,
        slot: str = "",
    ) -> None:
        self.prefix = ledger.prefix
        self.tag = tag
        # interface names are per namespace, but some tunnels key machine-wide things by them (wireguard-go's
        # and boringtun's UAPI socket /var/run/wireguard/<dev>.sock): topologies up at the same time (a warm
        # block) each get a slot of their own, appended to every name
        self.slot = slot
        self.spec = spec
        self.addr = addresses or AddressPlan()
        self._ledger = ledger
        self._stack = contextlib.ExitStack()
        self._link_builder = link_builder or veth_link
        self.client = NetNamespace(f"{ledger.prefix}-{tag}c", ledger)
        self.server = NetNamespace(f"{ledger.prefix}-{tag}s", ledger)
        self.sysctls_applied: dict[str, dict[str, str]] = {}
        self.link: EmulatedLink | None = None  # set by a link builder that puts a device in each namespace

    def ifname(self, suffix: str) -> str:
        """An interface name carrying the run prefix (<= 15 chars, the kernel's limit)."""
        return run_ifname(self.prefix, f"{suffix}{self.slot}")

    def ns_name(self, role: str) -> str:
        return {"client": self.client.name, "server": self.server.name}[role]

    def place(self, role: str) -> None:
        """Both roles are namespaces of this machine (tunnels.tunnel.Placed)."""
        return None

    def __enter__(self) -> Topology:
        try:
            self._stack.enter_context(self.client)
            self._stack.enter_context(self.server)
            for ns in (self.client, self.server):
                sysctl.apply(ns.name, NO_DAD)
                self.sysctls_applied[ns.name] = sysctl.apply(ns.name, self.spec.namespace_sysctls())
            link = self._link_builder(self)
            if link is not None:
                self._stack.enter_context(link)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._stack.close()

    def effective_settings(self) -> dict[str, Any]:
        """The settings that change results, as the kernel has them now in both namespaces (and the emulated
        link's devices): congestion control, socket buffer limits, default qdisc, MTU and offloads, kernel
        version. See topology/settings.py; recorded per trial as params["net"]."""
        link_devices = None
        if self.link is not None:
            roles = {self.client.name: "client", self.server.name: "server"}
            link_devices = {roles.get(ns, ns): dev for ns, dev in self.link.devices().items()}
        return settings.effective_settings(
            {"client": self.client.name, "server": self.server.name}, link_devices=link_devices
        )


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
