"""What the local site (sites/local.py) brings up for a trial of N clients (the `clients` and `storm` workloads):
the switched topology, the emulator on the server's uplink, role cgroups, the fleet (keys, server), the
readiness probe and, for overload, a CPU cap on the server, all on one ExitStack (teardown in reverse order on
exit, error or Ctrl-C). The workload then brings the clients up at its own pace (`fleet.up`) and measures."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType

from tunbench.host.cgroup import CpuCap, RoleCgroup
from tunbench.host.clean import WG_SOCKETS
from tunbench.host.ledger import Ledger
from tunbench.host.ready import ReadyProbe
from tunbench.link.emulator import LinkEmulator, LinkEnd, link_metrics
from tunbench.link.profile import Profile
from tunbench.metrics import core
from tunbench.monitor.counters import namespace_counters
from tunbench.monitor.sampler import Sampler
from tunbench.sites.base import SampledCost
from tunbench.topology.build import TopologySpec
from tunbench.topology.layout import Layout
from tunbench.topology.switched import SwitchedTopology, ip_batch
from tunbench.tunnels.fleet import Fleet
from tunbench.tunnels.registry import TunnelRef

log = logging.getLogger(__name__)


def meminfo() -> dict[str, int]:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return out


def kernel_mem_bytes() -> int:
    """Unreclaimable kernel memory (slab + per-CPU): where namespaces, veths and bridge ports live. The
    before/after difference prices a client namespace; unlike MemAvailable it ignores the page cache, yet
    on a busy host it still moves with everyone else's activity (read it at large N)."""
    m = meminfo()
    return m.get("SUnreclaim", 0) + m.get("Percpu", 0)


def failures_text(fleet: Fleet, errors: dict[int, str], limit: int = 3) -> str:
    """The first `limit` failed clients: each one's error and the tail of its log."""
    parts = []
    for i in sorted(errors)[:limit]:
        tail = fleet.client_log_tail(i, 6)
        parts.append(f"client {i}: {errors[i].splitlines()[0]}" + (f"\n{tail}" if tail else ""))
    return "\n".join(parts)


class FleetEnv:
    """`with FleetEnv(...) as env:` N client namespaces exist, the tunnel server runs, env.probe watches
    nothing yet; env.fleet.up(...) brings clients up (sites.base.FleetSetup)."""

    local = True  # every role on this machine: host-wide CPU shares and namespace counters are read

    def __init__(
        self,
        ledger: Ledger,
        tag: str,
        workdir: Path,
        tunnel: TunnelRef,
        profile: Profile,
        topology: TopologySpec,
        link_seed: int,
        clients: int,
        *,
        cpu_cap: bool = False,
        probe_interval_s: float = 0.1,
    ) -> None:
        self.ledger = ledger
        self.tag = tag
        self.workdir = workdir
        self.tunnel = tunnel
        self.profile = profile
        self.spec = topology
        self.link_seed = link_seed
        self.layout = Layout(ledger.prefix, tag, clients, mtu=topology.mtu, emulated_uplink=profile.emulated)
        self.want_cap = cpu_cap
        self.probe_interval_s = probe_interval_s
        self._stack = contextlib.ExitStack()
        self.topo: SwitchedTopology | None = None
        self.link: LinkEmulator | None = None
        self.cgroups: dict[str, RoleCgroup] = {}
        self.cap: CpuCap | None = None
        self.probe: ReadyProbe | None = None
        self._fleet: Fleet | None = None
        self.metrics: dict[str, float | None] = {}
        self.sysctls_applied: dict[str, str] = {}

    @property
    def fleet(self) -> Fleet:
        assert self._fleet is not None
        return self._fleet

    def __enter__(self) -> FleetEnv:
        try:
            self._build()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _build(self) -> None:
        lay, m = self.layout, self.metrics
        kmem0 = kernel_mem_bytes()
        self.topo = self._stack.enter_context(SwitchedTopology(self.ledger, lay, self.spec.namespace_sysctls()))
        m[core.TOPOLOGY_SETUP_S.name] = self.topo.setup_s
        self.sysctls_applied = self.topo.sysctls_applied
        m[core.NETNS_KMEM.name] = (kernel_mem_bytes() - kmem0) / lay.clients
        if lay.emulated_uplink:
            self.link = self._stack.enter_context(self._uplink_emulator())
        for role in ("server", "clients"):
            self.cgroups[role] = self._stack.enter_context(
                RoleCgroup(f"{self.ledger.prefix}-{self.tag}-{role}", self.ledger)
            )
        if self.want_cap:
            self.cap = self._stack.enter_context(CpuCap(f"{self.ledger.prefix}-{self.tag}-cap", self.ledger))
        self._fleet = self._stack.enter_context(Fleet(self.tunnel, lay, self.ledger, self.workdir, self.cgroups))
        m[core.KEYS_S.name] = self.fleet.keys_s
        self.fleet.start_server()
        m[core.SETUP_S.name] = self.fleet.server_up_s
        if self.cap is not None:
            self.cap.add(self.fleet.pids("server"))
        namespaces = {i: lay.client_ns(i) for i in lay.indices()}
        address = self.fleet.steps.render(self.fleet.multi.probe_address, self.fleet.vars, "multi.probe_address")
        self.probe = self._stack.enter_context(ReadyProbe(namespaces, address, self.probe_interval_s))

    def _uplink_emulator(self) -> LinkEmulator:
        """tunbench-link between the switch (gateway namespace) and the server: one bottleneck for all."""
        lay = self.layout

        def route_through() -> None:
            ip_batch(lay.uplink_gateway_script(), netns=lay.gateway_ns, what="routing the gateway to the emulator")
            ip_batch(lay.uplink_server_script(), netns=lay.server_ns, what="addressing the server's uplink")

        return LinkEmulator(
            self.profile,
            self.ledger,
            self.workdir,
            self.link_seed,
            a=LinkEnd(lay.gateway_ns, lay.uplink_dev_gateway),
            b=LinkEnd(lay.server_ns, lay.uplink_dev_server),
            mtu=lay.mtu,
            configure=route_through,
        )

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        t0 = time.monotonic()
        try:
            self._stack.close()
        finally:
            self._remove_stale_sockets()
        self.metrics[core.TEARDOWN_S.name] = time.monotonic() - t0
        if self.link is not None:
            self.metrics.update(link_metrics(self.link.stats))

    def _remove_stale_sockets(self) -> None:
        """A userspace WireGuard killed while starting (Ctrl-C mid-storm) leaves its UAPI socket behind."""
        lay = self.layout
        for dev in [lay.server_dev, *(lay.client_dev(i) for i in lay.indices())]:
            with contextlib.suppress(OSError):
                (WG_SOCKETS / f"{dev}.sock").unlink()

    def counters(self, metrics: dict[str, float | None], key_prefix: str = "") -> AbstractContextManager[None]:
        """Host counter deltas over a phase: the server's namespace, and the gateway's when the emulator sits
        on the uplink (N client namespaces would cost N reads at each edge: their sum is not taken)."""
        lay = self.layout
        namespaces = {"server": lay.server_ns, **({"gateway": lay.gateway_ns} if lay.emulated_uplink else {})}
        return namespace_counters(namespaces, metrics, prefix=self.ledger.prefix, key_prefix=key_prefix)

    @contextlib.contextmanager
    def sampling(self) -> Iterator[SampledCost]:
        """One phase's cost sampling by this machine's Sampler (`with env.sampling() as s:` ... `s.results`,
        `s.wall_s` once the block has ended)."""
        out = SampledCost()
        with Sampler(self.roles()) as sampler:
            yield out
        out.results, out.wall_s = sampler.results, sampler.wall_s

    def roles(self) -> dict[str, tuple[Callable[[], list[int]], RoleCgroup | None]]:
        """Sampler roles: the server per process (10 Hz) + its cgroup; the clients by cgroup totals only
        (sampling hundreds of processes at 10 Hz would perturb a 2-core host)."""
        roles: dict[str, tuple[Callable[[], list[int]], RoleCgroup | None]] = {
            "server": (lambda: self.fleet.pids("server"), self.cgroups.get("server")),
            "clients": (lambda: [], self.cgroups.get("clients")),
        }
        link_pid = self.link.pid if self.link is not None else None
        if link_pid:
            roles["link"] = ((lambda: [link_pid]), None)
        return roles

    def failures_text(self, errors: dict[int, str], limit: int = 3) -> str:
        return failures_text(self.fleet, errors, limit)

    def host_of(self) -> dict[int, str]:
        return {}  # every client on this machine

    def clients_per_host(self) -> dict[str, int]:
        return {}

    def start_lead_s(self, tolerance_s: float) -> float | None:
        return None  # one clock: the clients start at once

    def start_late_s(self) -> dict[str, float]:
        return {}

    def clock_uncertainty_s(self) -> float:
        return 0.0

    def lost_clients(self) -> dict[str, str]:
        return {}  # one machine: losing it ends the run

    def recorded(self) -> dict[str, object]:
        """What the trial's params record about the set-up, once it is up: the sysctls applied."""
        return {"sysctls": self.sysctls_applied}
