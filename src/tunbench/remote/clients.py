"""On the client host of a `clients` trial between two hosts: N namespaces, each with its device on the NIC
and its address from the inventory's pool (topology/hostclients.py has the layout and why). Built in
batches as the local switched topology is (a few `ip` processes, not N); torn down in reverse on exit,
error or Ctrl-C: the devices first (the next trial reuses the addresses), then the namespaces."""

from __future__ import annotations

import dataclasses
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

from tunbench.errors import CommandFailed
from tunbench.host.ledger import Ledger
from tunbench.remote.egress import NO_RA, add_lower_device, check_free_addresses, route_to
from tunbench.topology import sysctl
from tunbench.topology.hostclients import ClientWires
from tunbench.topology.switched import POOL, add_namespaces, ip_batch, remove_namespaces

log = logging.getLogger(__name__)


class ClientNamespaces:
    """`with ClientNamespaces(ledger, tag, link_prefix, addresses, server, sysctls) as cn:` client i
    (1-based) runs in `cn.netns[i - 1]`, from `addresses[i - 1]`, and reaches `server` over the host's NIC."""

    def __init__(
        self,
        ledger: Ledger,
        tag: str,
        link_prefix: str,
        addresses: list[str],
        server: str,
        sysctls: dict[str, str] | None = None,
    ) -> None:
        self.ledger = ledger
        self.addresses = list(addresses)
        self.server = server
        self.link_prefix = link_prefix
        self.sysctls = dict(sysctls or {})
        self.netns = [f"{ledger.prefix}-{tag}c{i:x}" for i in range(1, len(addresses) + 1)]
        self.sysctls_applied: dict[str, str] = {}
        self.device: dict[str, str | None] = {}
        self.setup_s: float | None = None
        self._wires: ClientWires | None = None
        self._created: list[str] = []

    def __enter__(self) -> ClientNamespaces:
        t0 = time.monotonic()
        try:
            self._build()
        except BaseException:
            self._teardown()
            raise
        self.setup_s = time.monotonic() - t0
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._teardown()

    def _build(self) -> None:
        nic, gateway = route_to(self.server)
        check_free_addresses(self.addresses, nic, "the client address", "tunbench_client_addresses")
        add_namespaces(self.ledger, self.netns, self._created, what="client")
        # before any device, which copies `default`: no IPv6 router advertisements or autoconfiguration on the
        # wire, and the scenario's own settings
        settings = {**(NO_RA if Path("/proc/sys/net/ipv6").exists() else {}), **self.sysctls}
        with ThreadPoolExecutor(POOL) as pool:
            applied = list(pool.map(lambda ns: sysctl.apply(ns, settings), self.netns))
        self.sysctls_applied = {k: v for k, v in applied[0].items() if k in self.sysctls} if applied else {}
        wires = ClientWires(self.link_prefix, nic, self.server, gateway)
        kind = add_lower_device(
            lambda k: dataclasses.replace(wires, kind=k).create_script(1, self.netns[0]), f"client 1's device on {nic}"
        )
        wires = dataclasses.replace(wires, kind=kind)
        self._wires = wires
        rest = [line for i in range(2, len(self.netns) + 1) for line in wires.create_script(i, self.netns[i - 1])]
        if rest:
            ip_batch(rest, what=f"adding the clients' devices ({wires.kind}) on {nic}")
        self.device = {"kind": wires.kind, "lower": nic, "gateway": gateway}

        def one(i: int) -> None:
            ip_batch(wires.client_script(i, self.addresses[i - 1]), netns=self.netns[i - 1], what=f"client {i}")

        with ThreadPoolExecutor(POOL) as pool:
            for fut in [pool.submit(one, i) for i in range(1, len(self.netns) + 1)]:
                fut.result()

    def _teardown(self) -> None:
        remove_namespaces(self.ledger, self._created, what="client", before=self._delete_devices)

    def _delete_devices(self, names: list[str]) -> None:
        """The clients' devices go before their namespaces, on the pool of the build (the next trial puts the
        same addresses on the same NIC)."""
        w = self._wires
        if w is None:
            return

        def one(i: int) -> None:
            try:
                ip_batch(w.delete_script(i), netns=self.netns[i - 1], what=f"deleting client {i}'s device")
            except CommandFailed as e:  # not made yet; or the namespace's deletion removes it later
                log.debug("%s", e)

        alive = set(names)
        with ThreadPoolExecutor(POOL) as pool:
            list(pool.map(one, [i for i, n in enumerate(self.netns, start=1) if n in alive]))
