"""On a client host of a two-host run with an emulated profile: the namespace the tunnel's client runs in,
its ipvlan (or macvlan) device on the host's NIC with the egress address, and tunbench-link on its way to the wire
(topology/egress.py has the layout and why). Owned by one ExitStack: the emulator stops first, then the
namespace goes, and its devices with it."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path
from types import TracebackType

from tunbench.errors import CommandFailed, ConfigError
from tunbench.host.ledger import Ledger
from tunbench.host.netns import NetNamespace
from tunbench.host.proc import run_cmd
from tunbench.link.emulator import LinkEmulator, LinkEnd
from tunbench.link.profile import Profile
from tunbench.topology import sysctl
from tunbench.topology.build import TopologySpec
from tunbench.topology.egress import EgressLayout
from tunbench.topology.switched import ip_batch


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

    def _build(self) -> None:
        nic, gateway = route_to(self.server)
        self._stack.enter_context(NetNamespace(self.netns, self.ledger))
        self.sysctls_applied = sysctl.apply(self.netns, self.spec.namespace_sysctls())
        lay = EgressLayout(self.link_prefix, self.netns, nic, self.address, self.server, gateway, self.spec.mtu)
        sysctl.apply(self.netns, lay.sysctls())  # before any device: each new one copies `default`
        for kind in ("ipvlan", "macvlan"):  # ipvlan where the kernel has it (see topology/egress.py)
            lay = dataclasses.replace(lay, kind=kind)
            try:
                ip_batch(lay.create_script(), what=f"adding the egress device ({kind}) on {nic}")
                break
            except CommandFailed as e:
                if kind == "macvlan" or "Unknown device type" not in str(e):
                    raise
        self.device = {"kind": lay.kind, "lower": nic, "gateway": gateway}
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
