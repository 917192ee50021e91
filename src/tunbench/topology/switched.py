"""SwitchedTopology: a switch namespace (Linux bridge), a server namespace and N client namespaces.

Built in batches so hundreds of namespaces take seconds: one `ip -batch` creates every namespace, one
`ip -n <ns> -batch` per namespace creates its veth (born with its peer in the switch namespace) and
configures it, run on a small thread pool; one batch enslaves every port to the bridge. Nothing is ever
created in the root namespace. Every namespace is written to the ledger before it exists; teardown ends
every process left inside (one scan of /proc, by pid) and deletes the namespaces in one batch.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

from tunbench.errors import CommandFailed
from tunbench.host.ledger import Ledger
from tunbench.host.netns import NETNS_DIR, kill_in_namespaces
from tunbench.host.proc import run_cmd
from tunbench.topology import sysctl
from tunbench.topology.layout import Layout

log = logging.getLogger(__name__)

GATEWAY_SYSCTLS = {"net.ipv4.ip_forward": "1", "net.ipv4.conf.all.rp_filter": "0"}
POOL = 4  # concurrent `ip` processes: enough to hide fork/exec latency on 2 cores


def ip_batch(lines: Iterable[str], *, netns: str | None = None, what: str, timeout_s: float = 120.0) -> None:
    """Run `ip [-n ns] -batch -` on the given lines; fail loudly with ip's own message."""
    argv = ["ip", *(["-n", netns] if netns else []), "-batch", "-"]
    run_cmd(argv, stdin="\n".join(lines) + "\n", what=what, timeout_s=timeout_s)


def add_namespaces(ledger: Ledger, names: list[str], created: list[str], *, what: str) -> None:
    """Create many namespaces with one `ip -batch`, each recorded in the ledger (and in `created`) first, so a
    crash in between still gets cleaned; refused if one exists already."""
    for n in names:
        if (NETNS_DIR / n).exists():
            raise CommandFailed(["ip", "netns", "add", n], 1, "namespace already exists", what=what)
    for n in names:
        ledger.add_netns(n)
        created.append(n)
    ip_batch((f"netns add {n}" for n in names), what=f"creating namespaces ({what})")


def remove_namespaces(
    ledger: Ledger, created: list[str], *, what: str, before: Callable[[list[str]], None] | None = None
) -> None:
    """Undo add_namespaces: end every process left inside, `before(names)` (e.g. delete devices first), then
    one `ip -batch` deletes them; a namespace that is gone leaves the ledger and `created`. Never raises
    (teardown must not hide the original error)."""
    names = [n for n in created if (NETNS_DIR / n).exists()]
    try:
        left = kill_in_namespaces(names)
        if left:
            log.warning("%d processes would not die inside the %s namespaces", left, what)
        if before is not None:
            before(names)
        if names:
            ip_batch((f"netns del {n}" for n in names), what=f"deleting namespaces ({what})")
    except Exception as e:
        log.warning("%s teardown: %s", what, e)
    for n in list(created):
        if not (NETNS_DIR / n).exists():
            ledger.drop_netns(n)
            created.remove(n)


class SwitchedTopology:
    """`with SwitchedTopology(ledger, layout, sysctls) as topo:` every namespace and link exists."""

    def __init__(self, ledger: Ledger, layout: Layout, sysctls: Mapping[str, str] | None = None) -> None:
        self.layout = layout
        self.ledger = ledger
        self.sysctls = dict(sysctls or {})
        self.sysctls_applied: dict[str, str] = {}
        self._created: list[str] = []
        self.setup_s: float | None = None
        self.teardown_s: float | None = None

    def __enter__(self) -> SwitchedTopology:
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

    # ---- build ---------------------------------------------------------------------------------------
    def _build(self) -> None:
        lay = self.layout
        add_namespaces(self.ledger, lay.all_namespaces(), self._created, what="multi topology")
        jobs: list[tuple[str, list[str]]] = [(lay.server_ns, lay.server_script())]
        if lay.emulated_uplink:
            jobs.append((lay.gateway_ns, lay.gateway_script()))
        jobs += [(lay.client_ns(i), lay.client_script(i)) for i in lay.indices()]
        self._parallel(jobs)
        ip_batch(lay.bridge_script(), netns=lay.bridge_ns, what="building the switch")
        self._wait_forwarding()
        if lay.emulated_uplink:
            sysctl.apply(lay.gateway_ns, GATEWAY_SYSCTLS)
        if self.sysctls:
            self._apply_sysctls([lay.server_ns, *(lay.client_ns(i) for i in lay.indices())])

    def _wait_forwarding(self, timeout_s: float = 10.0) -> None:
        """Bridge ports forward only once the kernel's link watch has seen their carrier (up to ~1 s)."""
        lay = self.layout
        want = {lay.server_port, *(lay.client_port(i) for i in lay.indices())}
        deadline = time.monotonic() + timeout_s
        while True:
            res = run_cmd(["bridge", "-n", lay.bridge_ns, "-j", "link", "show"], what="reading the switch's ports")
            forwarding = {p.get("ifname") for p in json.loads(res.stdout or "[]") if p.get("state") == "forwarding"}
            if want <= forwarding:
                return
            if time.monotonic() > deadline:
                missing = sorted(want - forwarding)
                raise CommandFailed(
                    ["bridge", "link"], 1, f"ports not forwarding after {timeout_s:g} s: {missing[:5]}", what="switch"
                )
            time.sleep(0.05)

    def _parallel(self, jobs: list[tuple[str, list[str]]]) -> None:
        def one(job: tuple[str, list[str]]) -> None:
            ns, lines = job
            ip_batch(lines, netns=ns, what=f"configuring namespace {ns}")

        with ThreadPoolExecutor(POOL) as pool:
            for fut in [pool.submit(one, j) for j in jobs]:
                fut.result()  # the first failure is raised (the others finish first)

    def _apply_sysctls(self, namespaces: list[str]) -> None:
        with ThreadPoolExecutor(POOL) as pool:
            results = list(pool.map(lambda ns: sysctl.apply(ns, self.sysctls), namespaces))
        self.sysctls_applied = results[0] if results else {}

    # ---- teardown ------------------------------------------------------------------------------------
    def _teardown(self) -> None:
        t0 = time.monotonic()
        remove_namespaces(self.ledger, self._created, what="multi-client")
        self.teardown_s = time.monotonic() - t0
