"""Interference and the underlay's counters on a run's hosts (`--hosts`), over a measured window whose edges
every host reads at the same instants.

The controller picks the window's start a little ahead (`lead_s`: four of the slowest host's best round
trips, at least LEAD_MIN_S) and sends each agent that instant mapped onto the host's monotonic clock through
the offset remote/clock.py measured; each agent sleeps until it and reads its edge (remote/hostwatch.py),
and the controller waits for it too before the workload starts and reads its own. At the end it does the
same: an instant a lead ahead, sent to every host at once, each reading its end edge when it comes. So the
window is one span of the controller's clock on every host, each edge read within the agent's wake-up delay
of it (measured, `interference_detail.hosts.<host>.late_s`) plus the clock offset's uncertainty.

Per host: its foreign CPU and steal (`interference.host.<host>.*`), judged against the run's thresholds
and named in the trial's reason (`host h2: foreign CPU 90% of a core (sh 89.9%)`), its other tunbench runs,
its agent's CPU; and for a pair's roles, the underlay device's counters as `counters.<role>.*`, with the SSH
connection's own traffic taken off where it shares the device.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tunbench.errors import TunbenchError
from tunbench.metrics import declare
from tunbench.monitor.counters import COUNTER, DEV
from tunbench.monitor.hostload import STEAL
from tunbench.monitor.interference import FOREIGN_CPU, INTERFERED, OTHER_RUNS, Thresholds, reason
from tunbench.remote.connection import AgentConnection

REMOTE_HARNESS_CPU = declare(
    "harness.remote_cpu_pct", "%", "lower", "info", "The hosts' agents' CPU over the window, % of one core (--hosts)."
)
HOST_FOREIGN = declare(
    "interference.host.{host}.foreign_cpu_pct", "%", "lower", "info",
    "A host's foreign CPU over the window (every process but tunbench's and the kernel's), % of one core "
    "(--hosts; interference.foreign_cpu_pct is the most of any host).",
)  # fmt: skip
HOST_STEAL = declare(
    "interference.host.{host}.steal_pct", "%", "lower", "info",
    "A host's steal over the window, % of all its CPUs' time (--hosts; host.steal_pct is the most of any host).",
)  # fmt: skip

LEAD_MIN_S = 0.02
LEAD_RTTS = 4


@dataclass
class CountRequest:
    """What a pair asks the next window to count on its hosts: host -> the roles there, host -> its underlay
    address; `devices` (role -> the underlay device's name) is filled when the window ends."""

    roles: dict[str, tuple[str, ...]]
    addresses: dict[str, str]
    devices: dict[str, str] = field(default_factory=dict)


def lead_s(conns: Sequence[AgentConnection]) -> float:
    """How far ahead an edge's instant is set: long enough for the request to reach the slowest host."""
    rtts = [c.clock.rtt_s for c in conns if c.clock is not None]
    return max(LEAD_MIN_S, LEAD_RTTS * max(rtts, default=0.0))


def sleep_until(at: float) -> None:
    while (left := at - time.monotonic()) > 0:
        time.sleep(left)


def run_prefixes(conns: Sequence[AgentConnection], own_prefix: str) -> list[str]:
    """This run's prefixes: the controller's and each agent's (an agent on the controller's machine, or two
    on one host, is this run, not another)."""
    return sorted({own_prefix, *(c.info.prefix for c in conns if c.info is not None)})


def _stop(conn: AgentConnection, key: str, at: float) -> dict[str, Any] | None:
    try:
        return dict(conn.call("watch_stop", watch=key, at=at))
    except (TunbenchError, OSError):
        return None


@contextlib.contextmanager
def host_window(
    conns: Sequence[AgentConnection],
    metrics: dict[str, float | None],
    params: dict[str, Any],
    own_prefix: str,
    limits: Thresholds,
    local: contextlib.AbstractContextManager[None],
    counts: CountRequest | None = None,
) -> Iterator[None]:
    """A measured window on the hosts, `local` (this machine's watch) entered and left at the same instants;
    the hosts' figures merged into the trial's on exit (`merge`). Watching never fails a trial: a host that
    does not answer has no figures."""
    mine = run_prefixes(conns, own_prefix)
    timed = [c for c in conns if c.clock is not None and not c.lost]
    lead = lead_s(timed)
    start_at = time.monotonic() + lead
    keys: dict[str, tuple[AgentConnection, str]] = {}
    for conn in timed:
        assert conn.clock is not None
        address = counts.addresses.get(conn.name) if counts is not None else None
        with contextlib.suppress(TunbenchError, OSError):
            at = conn.clock.to_host_mono(start_at)
            keys[conn.name] = (conn, str(conn.call("watch_start", at=at, exclude=mine, address=address)))
    sleep_until(start_at)
    pool = ThreadPoolExecutor(max(1, len(keys)), thread_name_prefix="tunbench-watch")
    futures: dict[str, Future[dict[str, Any] | None]] = {}
    try:
        with local:
            yield None
            stop_at = time.monotonic() + lead
            for name, (conn, key) in keys.items():
                assert conn.clock is not None
                futures[name] = pool.submit(_stop, conn, key, conn.clock.to_host_mono(stop_at))
            sleep_until(stop_at)
        hosts = {name: r for name, f in futures.items() if (r := f.result()) is not None}
    finally:
        pool.shutdown(wait=True)
    merge(metrics, params, hosts, limits, counts)


def merge(
    metrics: dict[str, float | None],
    params: dict[str, Any],
    hosts: Mapping[str, Mapping[str, Any]],
    limits: Thresholds,
    counts: CountRequest | None = None,
) -> None:
    """Fold the hosts' window figures into a trial's (pure): each host's foreign CPU and steal, judged against
    `limits` and named in `params["interference"]` by host; `host:prefix` runs join the other runs; the
    figures judged (`interference.foreign_cpu_pct`, `host.steal_pct`) become the most of any host, this
    machine's kept in `interference_detail.controller`; the pair's counters (`counts`) as `counters.<role>.*`."""
    if not hosts:
        return
    detail = params.setdefault("interference_detail", {})
    detail["controller"] = {"foreign_cpu_pct": metrics.get(FOREIGN_CPU.name), "steal_pct": metrics.get(STEAL.name)}
    whys = [str(params.get("interference") or "")]
    runs: list[str] = []
    agent_pct = 0.0
    per_host: dict[str, Any] = {}
    for name, fig in sorted(hosts.items()):
        foreign, steal = fig.get("foreign_cpu_pct"), fig.get("steal_pct")
        metrics[HOST_FOREIGN.key(host=name)] = foreign
        metrics[HOST_STEAL.key(host=name)] = steal
        runs += [f"{name}:{r}" for r in fig.get("runs", [])]
        agent_pct += float(fig.get("agent_cpu_pct") or 0.0)
        why = reason({"foreign_cpu_pct": foreign, "top": fig.get("top", [])}, steal, limits)
        whys += [f"host {name}: {part}" for part in why.split("; ") if part]
        per_host[name] = {k: fig.get(k) for k in ("foreign_cpu_pct", "steal_pct", "top", "late_s", "read_s")}
        if counts is not None and (net := fig.get("net")) is not None:
            per_host[name]["control"] = net.get("control")
            for role in counts.roles.get(name, ()):
                _counters(metrics, role, net)
                counts.devices[role] = str(net["device"])
    detail["hosts"] = per_host
    metrics[REMOTE_HARNESS_CPU.name] = agent_pct
    foreign_all = [v for n in hosts if (v := metrics.get(HOST_FOREIGN.key(host=n))) is not None]
    steal_all = [v for n in hosts if (v := metrics.get(HOST_STEAL.key(host=n))) is not None]
    if foreign_all:
        metrics[FOREIGN_CPU.name] = max(foreign_all)
    if steal_all:
        metrics[STEAL.name] = max(steal_all)
    if runs:
        detail["remote_runs"] = runs
        metrics[OTHER_RUNS.name] = (metrics.get(OTHER_RUNS.name) or 0.0) + len(runs)
        whys.append(f"another tunbench run live on a host ({', '.join(runs)})")
    params["interference"] = "; ".join(w for w in whys if w)
    metrics[INTERFERED.name] = 1.0 if params["interference"] else 0.0


@contextlib.contextmanager
def phase_counters(
    conn: AgentConnection,
    address: str | None,
    role: str,
    metrics: dict[str, float | None],
    exclude: Sequence[str],
    key_prefix: str = "",
) -> Iterator[None]:
    """One host's underlay counters over a block (a fleet's phase), read by its agent's watch at instants
    chosen as host_window chooses them: the device that holds `address` and the host's UDP/TCP counters,
    with the control connection's share taken off where it shares the device, as `{key_prefix}counters.
    <role>.*`. Counters explain results: a host that does not answer leaves them out, never fails the block."""
    if address is None or conn.clock is None or conn.lost:
        yield None
        return
    lead = lead_s([conn])
    start_at = time.monotonic() + lead
    key = None
    with contextlib.suppress(TunbenchError, OSError):
        key = str(
            conn.call("watch_start", at=conn.clock.to_host_mono(start_at), exclude=list(exclude), address=address)
        )
    sleep_until(start_at)
    yield None
    if key is None:
        return
    stop_at = time.monotonic() + lead
    got = _stop(conn, key, conn.clock.to_host_mono(stop_at))
    if got is not None and (net := got.get("net")) is not None:
        read: dict[str, float | None] = {}
        _counters(read, role, net)
        metrics.update({key_prefix + k: v for k, v in read.items()})


def _counters(metrics: dict[str, float | None], role: str, net: Mapping[str, Any]) -> None:
    """A role's counters from its host's figures: every SNMP delta, the device's non-zero field deltas (as
    monitor/counters.py's `deltas` keeps them)."""
    for name, v in net.get("snmp", {}).items():
        metrics[COUNTER.key(role=role, counter=name)] = float(v)
    for f, v in net.get("dev", {}).items():
        if v:
            metrics[DEV.key(role=role, device=str(net["device"]), field=f)] = float(v)
