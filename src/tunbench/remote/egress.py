"""On a client host of a two-host run with an emulated profile: the namespace the tunnel's client runs in,
its ipvlan (or macvlan) device on the host's NIC with the egress address, and tunbench-link on its way to the wire
(topology/egress.py has the layout and why). Owned by one ExitStack: the emulator stops first, then the
namespace goes, and its devices with it."""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import logging
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from tunbench.errors import CommandFailed, ConfigError
from tunbench.host.ledger import Ledger
from tunbench.host.netns import NetNamespace
from tunbench.host.proc import run_cmd
from tunbench.link.emulator import LinkEmulator, LinkEnd
from tunbench.link.profile import Profile
from tunbench.topology import sysctl
from tunbench.topology.build import NO_DAD, TopologySpec
from tunbench.topology.egress import EgressLayout
from tunbench.topology.switched import ip_batch

log = logging.getLogger(__name__)


def check_egress_address(address: str, nic: str) -> None:
    """The egress address must be free on this host (on a device of its own, the host's traffic to it, SSH
    too, would go into the emulator) and inside a network of the NIC that routes to the server (else the
    replies never find it)."""
    check_free_addresses([address], nic, "the egress address", "tunbench_egress_address")


def check_free_addresses(addresses: list[str], nic: str, what: str, key: str) -> None:
    """Each address must be free on this host and inside a network of `nic` (the device that routes to the
    server); `what` and `key` (the inventory variable) name them in the error."""
    res = run_cmd(["ip", "-j", "addr", "show"], what="reading this host's addresses", timeout_s=5)
    nets = []
    owned: dict[ipaddress.IPv4Address | ipaddress.IPv6Address, str] = {}
    for link in json.loads(res.stdout or "[]"):
        for a in link.get("addr_info", []):
            if a.get("family") != "inet":
                continue
            owned[ipaddress.ip_address(a["local"])] = str(link.get("ifname"))
            if link.get("ifname") == nic:
                nets.append(ipaddress.ip_network(f"{a['local']}/{a['prefixlen']}", strict=False))
    for address in addresses:
        want = ipaddress.ip_address(address)
        if want in owned:
            raise ConfigError(
                f"{what} {address} is already on this host's {owned[want]}: it must be an unused address of "
                f"the network ({key})"
            )
        if not any(want in n for n in nets):
            shown = ", ".join(map(str, nets)) or "none"
            raise ConfigError(
                f"{what} {address} is not in a network of {nic}, the device that routes to the server "
                f"(its networks: {shown}): pick unused addresses there ({key})"
            )


def route_to(server: str) -> tuple[str, str | None]:
    """(device, next hop or None) this host's own routing takes to `server`: where the egress device goes."""
    res = run_cmd(["ip", "-j", "route", "get", server], what=f"finding this host's route to {server}", timeout_s=5)
    try:
        (route,) = json.loads(res.stdout or "[]")
    except ValueError:
        route = {}
    dev = route.get("dev")
    if not dev or dev == "lo":
        raise ConfigError(f"this host has no route to the server's address {server} through a network device")
    return str(dev), route.get("gateway")


def add_lower_device(script: Callable[[str], list[str]], what: str) -> str:
    """Run `script(kind)` for an ipvlan device where the kernel has ipvlan (it keeps the NIC's MAC address:
    topology/egress.py says why), else for a macvlan one; the kind that was made."""
    for kind in ("ipvlan", "macvlan"):
        try:
            ip_batch(script(kind), what=f"adding {what} ({kind})")
            return kind
        except CommandFailed as e:
            if kind == "macvlan" or not any(w in str(e) for w in ("Unknown device type", "not supported")):
                raise
    raise AssertionError("unreachable")


NO_RA = {
    **NO_DAD,
    "net.ipv6.conf.all.accept_ra": "0",
    "net.ipv6.conf.default.accept_ra": "0",
    "net.ipv6.conf.all.autoconf": "0",
    "net.ipv6.conf.default.autoconf": "0",
}


class EgressLink:
    """`with EgressLink(...) as egress:` the tunnel client's namespace `egress.netns` reaches the server only
    through the emulator; `egress.emulator.stats` holds its counters after exit."""

    def __init__(
        self,
        ledger: Ledger,
        tag: str,
        link_prefix: str,
        spec: TopologySpec,
        profile: Profile,
        seed: int,
        workdir: Path,
        *,
        address: str,
        server: str,
    ) -> None:
        self.ledger = ledger
        self.netns = f"{ledger.prefix}-{tag}c"
        self.link_prefix = link_prefix
        self.spec = spec
        self.profile = profile
        self.seed = seed
        self.workdir = workdir
        self.address = address
        self.server = server
        self.emulator: LinkEmulator | None = None
        self.sysctls_applied: dict[str, str] = {}
        self.device: dict[str, str | None] = {}  # what carries the egress: kind, lower device, next hop
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> EgressLink:
        try:
            self._build()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._stack.close()

    def _delete_device(self, lay: EgressLayout) -> None:
        try:
            ip_batch(lay.delete_script(), netns=self.netns, what="deleting the egress device")
        except CommandFailed as e:  # the namespace's deletion removes it anyway, later
            log.warning("%s", e)

    def _build(self) -> None:
        nic, gateway = route_to(self.server)
        check_egress_address(self.address, nic)
        lay = EgressLayout(self.link_prefix, self.netns, nic, self.address, self.server, gateway, self.spec.mtu)
        self._stack.enter_context(NetNamespace(self.netns, self.ledger))
        # before any device, which copies `default`: the egress's own, no IPv6 router advertisements or
        # autoconfiguration on the wire side (IPv6 there would bypass the emulator), and addresses a tunnel
        # gives its device usable at once (as in every namespace of a local run)
        sysctl.apply(self.netns, {**lay.sysctls(), **(NO_RA if Path("/proc/sys/net/ipv6").exists() else {})})
        self.sysctls_applied = sysctl.apply(self.netns, self.spec.namespace_sysctls())
        kind = add_lower_device(
            lambda k: dataclasses.replace(lay, kind=k).create_script(), f"the egress device on {nic}"
        )
        lay = dataclasses.replace(lay, kind=kind)
        self._stack.callback(self._delete_device, lay)
        self.device = {"kind": lay.kind, "lower": nic, "gateway": gateway, "address": self.address}
        ip_batch(lay.wire_script(), netns=self.netns, what="addressing the egress device")

        def route_through() -> None:
            ip_batch(lay.route_script(), netns=self.netns, what="routing the egress through the emulator")

        self.emulator = self._stack.enter_context(
            LinkEmulator(
                self.profile,
                self.ledger,
                self.workdir,
                self.seed,
                a=LinkEnd(self.netns, lay.tunnel_side),
                b=LinkEnd(self.netns, lay.wire_side),
                mtu=self.spec.mtu,
                configure=route_through,
            )
        )
