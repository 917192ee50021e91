"""What else ran on the host while a trial measured: other tunbench runs, CPU used by processes that are
neither this run's nor the kernel's ("foreign" CPU), and tunbench's own CPU (the harness).

Everything is read at the two edges of the workload's call (cumulative counters, no sampling in between),
so the reading itself costs nothing inside the window:

- `interference.other_runs`: live tunbench runs on this host at either edge, other than this one (a
  ledger under /run/tunbench whose owner pid is alive with the recorded start time; a killed run's stale
  ledger does not count), their prefixes in `params["interference_detail"]["runs"]`;
- `interference.foreign_cpu_pct`: the CPU of every process that is neither in this run's process tree (the
  controller and every descendant) nor a kernel thread (ksoftirqd, kworkers: the network stack's deferred
  work is the trial's own), with the children each reaped, in % of one core (`between`);
- `harness.cpu_pct`: the controller process's own CPU (all its threads: sampling, logging, progress),
  in % of one core.

A trial is *interfered* when another run was live, or foreign CPU or steal reached its threshold
(`Thresholds`): `interfered` = 1.0 and `params["interference"]` says why, else 0.0 and ""; the other
runs' prefixes and the foreign processes that used most are in `params["interference_detail"]`.
The thresholds' defaults come from measurements on a 2-vCPU VM (docs/cross-checks.md, "Interference").
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

import psutil

from tunbench.host.ledger import all_ledgers, owner_alive
from tunbench.metrics import declare
from tunbench.monitor.hostload import STEAL, host_load

FOREIGN_CPU = declare(
    "interference.foreign_cpu_pct", "%", "lower", "info",
    "CPU of processes that are neither this run's nor the kernel's, in % of one core, over the window.",
)  # fmt: skip
OTHER_RUNS = declare("interference.other_runs", "count", "lower", "info", "Other tunbench runs live meanwhile.")
HARNESS_CPU = declare("harness.cpu_pct", "%", "lower", "info", "tunbench's own CPU over the window, % of one core.")
INTERFERED = declare(
    "interfered", "flag", "none", "info", "1 when something else ran during the trial (docs/cross-checks.md)."
)

KTHREADD_PID = 2
FOREIGN_CPU_PCT = 10.0  # % of one core: an idle 2-vCPU VM shows 0-2% (docs/cross-checks.md)
STEAL_PCT = 5.0  # % of all CPUs' time


@dataclass(frozen=True)
class Thresholds:
    """When a window counts as interfered (None: that cause is not judged)."""

    foreign_cpu_pct: float | None = FOREIGN_CPU_PCT
    steal_pct: float | None = STEAL_PCT


@dataclass
class Edge:
    """One edge's reading."""

    t_s: float
    own_s: float
    own_pids: set[int]
    harness_s: float
    others: dict[int, tuple[str, float, float]]  # pid -> (name, own CPU-s, with its reaped children) of foreign ones
    runs: set[str] = field(default_factory=set)


def _cpu_s(p: psutil.Process, *, children: bool) -> float:
    t = p.cpu_times()
    total = t.user + t.system
    if children:
        total += t.children_user + t.children_system
    return float(total)


def live_runs(exclude: str | Collection[str]) -> set[str]:
    """The prefixes of the tunbench runs alive on this host other than `exclude` (this run's own: its
    controller's prefix, and on `--hosts` its agents'), stale ledgers of killed runs excluded."""
    mine = {exclude} if isinstance(exclude, str) else set(exclude)
    out = set()
    for _, ledger in all_ledgers():
        if ledger is not None and ledger.prefix not in mine and owner_alive(ledger):
            out.add(ledger.prefix)
    return out


def read_edge(
    own_prefix: str | Collection[str],
    *,
    start: bool = False,
    also_own: Collection[int] = (),
    scope: Callable[[int], bool] | None = None,
) -> Edge:
    """The host's counters, this run's process tree and every other process's CPU, now. The controller's own
    CPU is read last at a window's `start` and first at its end, so the reading itself stays outside.
    `also_own`: more pids that are this run's though not in its tree (an agent's SSH session, which carries
    its requests); `scope`: which pids are on this host at all (None: every one /proc shows)."""
    me = psutil.Process()
    t = me.cpu_times()
    harness_s = float(t.user + t.system)
    own_s = harness_s + float(t.children_user + t.children_system)
    own_pids = {me.pid}
    with contextlib.suppress(psutil.Error):
        for child in me.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                own_s += _cpu_s(child, children=True)
                own_pids.add(child.pid)
    others: dict[int, tuple[str, float, float]] = {}
    for p in psutil.process_iter(["ppid", "name"]):
        if p.pid in own_pids or p.pid == KTHREADD_PID or p.info["ppid"] == KTHREADD_PID or p.pid in also_own:
            continue  # this run, or a kernel thread (the network stack's deferred work is the trial's own)
        if scope is not None and not scope(p.pid):
            continue  # another host's (hosts that share one kernel: remote/hostwatch.py)
        with contextlib.suppress(psutil.Error):
            ct = p.cpu_times()
            alone = float(ct.user + ct.system)
            others[p.pid] = (str(p.info["name"]), alone, alone + float(ct.children_user + ct.children_system))
    runs = live_runs(own_prefix)
    if start:
        t = me.cpu_times()
        harness_s = float(t.user + t.system)
    return Edge(time.monotonic(), own_s, own_pids, harness_s, others, runs)


def between(a: Edge, b: Edge) -> dict[str, Any]:
    """The figures between two edges (pure): foreign and harness CPU in % of one core, other runs, and the
    foreign processes that used the most.

    Foreign CPU is counted per process, from the kernel's exact runtime of each task: the CPU of every
    process outside this run's tree and not a kernel thread at the end edge, less at the start edge, each
    with its reaped children (so a process that ended inside the window is counted through the parent that
    reaped it, and one born inside it wholly). The host's tick-sampled busy time (`host.busy_pct`, read by
    hostload at the same edges) is no substitute: it charges the network stack's work in a task's context
    to softirq and misses short bursts, a few tenths of a CPU-second per window here
    (docs/benchmarks/interference.md)."""
    wall = max(b.t_s - a.t_s, 1e-9)
    foreign_s = max(0.0, sum(v[2] for v in b.others.values()) - sum(v[2] for v in a.others.values()))
    own_s = max(0.0, b.own_s - a.own_s)
    # who burned it: each process's own CPU (what it reaped is another's, counted in the total above)
    top = sorted(((v[0], v[1] - a.others[p][1]) for p, v in b.others.items() if p in a.others), key=lambda x: -x[1])
    return {
        "cpu_s": {"own": own_s, "foreign": foreign_s, "wall": wall},
        "foreign_cpu_pct": 100.0 * foreign_s / wall,
        "harness_cpu_pct": 100.0 * max(0.0, b.harness_s - a.harness_s) / wall,
        "runs": sorted(a.runs | b.runs),
        "top": [(name, round(100.0 * s / wall, 1)) for name, s in top[:3] if s / wall >= 0.01],
    }


def reason(figures: dict[str, Any], steal_pct: float | None, limits: Thresholds) -> str:
    """Why a window counts as interfered, or "" (pure)."""
    why = []
    if runs := figures.get("runs"):
        why.append(f"another tunbench run live ({', '.join(runs)})")
    foreign = figures.get("foreign_cpu_pct")
    if limits.foreign_cpu_pct is not None and foreign is not None and foreign >= limits.foreign_cpu_pct:
        who = ", ".join(f"{n} {p:g}%" for n, p in figures.get("top", []))
        why.append(f"foreign CPU {foreign:.0f}% of a core" + (f" ({who})" if who else ""))
    if limits.steal_pct is not None and steal_pct is not None and steal_pct >= limits.steal_pct:
        why.append(f"steal {steal_pct:.1f}%")
    return "; ".join(why)


@contextlib.contextmanager
def interference(
    metrics: dict[str, float | None], params: dict[str, Any], own_prefix: str | Collection[str], limits: Thresholds
) -> Iterator[None]:
    """Record the interference figures of the `with` block into a trial's metrics and params. Wrap it
    around `host_load` (steal comes from there). Reading never fails a trial."""
    try:
        start = read_edge(own_prefix, start=True)
    except (OSError, psutil.Error):
        yield None
        return
    yield None
    try:
        end = read_edge(own_prefix)
    except (OSError, psutil.Error):
        return
    fig = between(start, end)
    metrics[FOREIGN_CPU.name] = fig["foreign_cpu_pct"]
    metrics[OTHER_RUNS.name] = float(len(fig["runs"]))
    metrics[HARNESS_CPU.name] = fig["harness_cpu_pct"]
    why = reason(fig, metrics.get(STEAL.name), limits)
    metrics[INTERFERED.name] = 1.0 if why else 0.0
    params["interference"] = why
    params["interference_detail"] = {"runs": fig["runs"], "top": fig["top"], "cpu_s": fig["cpu_s"]}


@dataclass(frozen=True)
class RedoPolicy:
    """Which windows are void and measured again (RetryTrial): `steal_pct`, a window that lost at least this
    share of all CPUs' time to steal; `interfered`, any interfered window (`limits` judge it). Default: none
    (kept, flagged). `until`: the run's budget ends then (time.monotonic()); a void window whose measuring
    again would end after it is kept as it is, flagged, and the budget stops the run."""

    steal_pct: float | None = None
    interfered: bool = False
    limits: Thresholds = Thresholds()
    until: float | None = None

    @classmethod
    def of(
        cls, steal_pct: float | None, interfered: bool, foreign_cpu_pct: float | None, until: float | None = None
    ) -> RedoPolicy:
        steal = steal_pct if steal_pct is not None else STEAL_PCT
        return cls(steal_pct, interfered, Thresholds(foreign_cpu_pct=foreign_cpu_pct, steal_pct=steal), until)

    def fits(self, attempt_s: float, now: float) -> bool:
        """Whether measuring a void window again, taking `attempt_s` as its attempt did, ends within the
        budget (pure)."""
        return self.until is None or now + attempt_s <= self.until

    def void(self, metrics: dict[str, float | None], params: dict[str, Any]) -> str:
        """Why a measured window is void under this policy, or "" (pure)."""
        if self.interfered and metrics.get(INTERFERED.name) == 1.0:
            return f"interfered: {params.get('interference') or 'see the trial'}: void, measured again"
        steal = metrics.get(STEAL.name)
        if self.steal_pct is None or steal is None or steal < self.steal_pct:
            return ""
        return (
            f"the hypervisor took {steal:.1f}% of the CPUs' time during the window (redo_steal_pct "
            f"{self.steal_pct:g}%): void, measured again"
        )


@contextlib.contextmanager
def watched(
    metrics: dict[str, float | None], params: dict[str, Any], own_prefix: str | Collection[str], limits: Thresholds
) -> Iterator[None]:
    """The host's load (`host.*`) and the interference figures over the `with` block, read at its edges."""
    with interference(metrics, params, own_prefix, limits), host_load(metrics):
        yield None
