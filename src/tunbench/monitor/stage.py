"""What saturated a side over the measured window (docs/scaling.md): from the sampler's per-thread and
per-CPU readings (monitor/threads.py), each side's busiest tunnel thread, how busy its CPUs were and their
softirq time, and the first saturated serial stage:

- "thread NAME", when the side was pinned to one CPU: its busiest tunnel thread plus that CPU's softirq
  time (the kernel's packet work there, much of it on the thread's behalf) reached SATURATED of the CPU;
- else "all cores busy": the side's CPUs were busy at least SATURATED of the window, on average (by anything
  that ran there: its tunnel, its traffic generator, the other side where they share, softirqs);
- else "thread NAME": a tunnel thread of the side used at least SATURATED of one core by itself;
- else "softirq CPU N": one of the side's CPUs spent at least SATURATED of the window in softirqs;
- else "none": nothing the side runs on was saturated (the limit is elsewhere: the other side, the
  generator, the link, a window or a queue).

A side's CPUs are those it was placed on (`params.cpuset`: the cores axis or `[run] cpuset`), every CPU
of the host when it was not placed. The figures are % of one core (threads, a CPU's softirq) or of the
side's CPUs (busy). The arithmetic is pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tunbench.host.cgroup import parse_cpu_list
from tunbench.metrics import Metrics, declare
from tunbench.monitor.threads import CpuTime, ThreadTime

SATURATED = 0.95
"""The share of a core (a thread, a CPU's softirq) or of a side's CPUs (busy) at which it counts as saturated."""

ROLES = ("client", "server")
TOP_THREADS = 8  # the busiest threads of a side kept in the record's params

BUSIEST_THREAD = declare(
    "stage.{role}.busiest_thread_pct", "%", "none", "info",
    "The busiest thread of a side's tunnel processes over the measured window, in % of one core "
    "(/proc/PID/task/TID/stat: utime + stime).",
)  # fmt: skip
CPUS_BUSY = declare(
    "stage.{role}.cpus_busy_pct", "%", "none", "info",
    "How busy the CPUs a side ran on were over the measured window, in % of all of them (everything but "
    "idle and iowait, whoever ran: the tunnel, the generator, the other side where they share).",
)  # fmt: skip
SOFTIRQ_MAX = declare(
    "stage.{role}.softirq_pct", "%", "none", "info",
    "The most softirq time one of a side's CPUs spent over the measured window, in % of that CPU.",
)  # fmt: skip
CPUS_GIVEN = declare("stage.{role}.cpus", "count", "none", "info", "How many CPUs a side could run on.")
SATURATED_FLAG = declare(
    "stage.{role}.saturated", "flag", "none", "info",
    "1 when a stage of the side was saturated over the window (a pinned side's thread and its CPU's softirq, "
    "all its cores, one thread or one CPU's softirqs at 95% or more), 0 when none was.",
)  # fmt: skip
THREAD_SOFTIRQ = declare(
    "stage.{role}.thread_softirq_pct", "%", "none", "info",
    "For a side pinned to one CPU: its busiest tunnel thread plus that CPU's softirq time over the measured "
    "window, in % of the CPU (capped at 100); the figure its thread is judged saturated on (docs/scaling.md).",
)  # fmt: skip
CPU_SOFTIRQ = declare(
    "host_cpu.{cpu}.softirq_pct", "%", "none", "info",
    "Softirq time of one CPU of this host over the measured window, in % of the window.",
)  # fmt: skip
CPU_BUSY = declare(
    "host_cpu.{cpu}.busy_pct", "%", "none", "info",
    "How busy one CPU of this host was over the measured window (everything but idle and iowait), in %.",
)  # fmt: skip


@dataclass(frozen=True)
class ThreadUse:
    """One thread's CPU over the window: its id, name, process and % of one core."""

    tid: int
    comm: str
    pid: int
    pct: float


@dataclass(frozen=True)
class Stage:
    """A side's saturated stage ("all cores busy", "thread NAME", "softirq CPU N" or "none") and the
    figures it was read from."""

    name: str
    cpus: tuple[int, ...]
    busy_pct: float
    busiest: ThreadUse | None
    softirq_pct: float
    pinned: bool = False  # the side had one CPU: its busiest thread is judged with that CPU's softirq

    @property
    def saturated(self) -> bool:
        return self.name != "none"

    @property
    def thread_softirq_pct(self) -> float | None:
        """The busiest thread plus its one CPU's softirq, in % of that CPU (capped at 100: where the kernel
        charges a softirq to the thread it interrupted as well, the sum counts it twice); None when the side
        was not pinned to one CPU."""
        if not self.pinned or self.busiest is None:
            return None
        return min(100.0, self.busiest.pct + self.softirq_pct)

    def thread_text(self) -> str:
        """ "socat (thread) 93% + softirq 5% of CPU 1 = 98%: saturated" for a pinned side, "" otherwise."""
        both = self.thread_softirq_pct
        if both is None or self.busiest is None:
            return ""
        verdict = "saturated" if both >= 100.0 * SATURATED else "not saturated"
        return (
            f"{self.busiest.comm} (thread) {self.busiest.pct:.0f}% + softirq {self.softirq_pct:.0f}% of CPU "
            f"{self.cpus[0]} = {both:.0f}%: {verdict}"
        )


def _at(points: Sequence[tuple[float, float]], t: float) -> float:
    return float(np.interp(t, [p[0] for p in points], [p[1] for p in points]))


def thread_use(series: Sequence[tuple[float, Mapping[int, ThreadTime]]], t0: float, t1: float) -> list[ThreadUse]:
    """Each thread's CPU between t0 and t1 (the sampler's clock), in % of one core, busiest first: its
    cumulative time interpolated at each edge between the readings around it; a thread first seen after the
    first reading counts from 0 before it (it was born in between)."""
    if not series or t1 <= t0:
        return []
    first = series[0][1]
    points: dict[int, list[tuple[float, float]]] = {}
    last: dict[int, ThreadTime] = {}
    for t, threads in series:
        for tid, th in threads.items():
            if tid not in points and tid not in first:
                points[tid] = [(series[0][0], 0.0)] if t > series[0][0] else []
            points.setdefault(tid, []).append((t, th.cpu_s))
            last[tid] = th
    out = [
        ThreadUse(tid, last[tid].comm, last[tid].pid, 100.0 * max(0.0, _at(pts, t1) - _at(pts, t0)) / (t1 - t0))
        for tid, pts in points.items()
    ]
    return sorted(out, key=lambda u: (-u.pct, u.tid))


def cpu_use(
    series: Sequence[tuple[float, Mapping[int, CpuTime]]], t0: float, t1: float
) -> dict[int, tuple[float, float]]:
    """Each CPU's (busy %, softirq %) between t0 and t1, interpolated as thread_use does."""
    if not series or t1 <= t0:
        return {}
    out: dict[int, tuple[float, float]] = {}
    for cpu in series[0][1]:
        busy = [(t, c[cpu].busy_s) for t, c in series if cpu in c]
        soft = [(t, c[cpu].softirq_s) for t, c in series if cpu in c]
        span = t1 - t0
        out[cpu] = (
            min(100.0, 100.0 * max(0.0, _at(busy, t1) - _at(busy, t0)) / span),
            min(100.0, 100.0 * max(0.0, _at(soft, t1) - _at(soft, t0)) / span),
        )
    return out


def stage(cpus: Sequence[int], use: Mapping[int, tuple[float, float]], threads: Sequence[ThreadUse]) -> Stage:
    """The first saturated serial stage of a side on these CPUs (the module docstring's order)."""
    mine = [c for c in cpus if c in use]
    busy = sum(use[c][0] for c in mine) / len(mine) if mine else 0.0
    soft_cpu = max(mine, key=lambda c: use[c][1], default=None)
    soft = use[soft_cpu][1] if soft_cpu is not None else 0.0
    busiest = threads[0] if threads else None
    pinned = len(mine) == 1
    limit = 100.0 * SATURATED
    with_softirq = Stage("", tuple(mine), busy, busiest, soft, pinned).thread_softirq_pct
    if busiest is not None and with_softirq is not None and with_softirq >= limit:
        name = f"thread {busiest.comm}"  # on one CPU, more specific than "all cores busy", which it implies
    elif mine and busy >= limit:
        name = "all cores busy"
    elif busiest is not None and busiest.pct >= limit:
        name = f"thread {busiest.comm}"
    elif soft_cpu is not None and soft >= limit:
        name = f"softirq CPU {soft_cpu}"
    else:
        name = "none"
    return Stage(name, tuple(mine), busy, busiest, soft, pinned)


def side_cpus(cpuset: Mapping[str, str], role: str, online: Sequence[int]) -> list[int]:
    """The CPUs a side could run on: its placement's, else every CPU the host has."""
    text = cpuset.get(role, "")
    return parse_cpu_list(text) if text else list(online)


def saturation(
    threads: Mapping[str, Sequence[tuple[float, Mapping[int, ThreadTime]]]],
    cpus: Sequence[tuple[float, Mapping[int, CpuTime]]],
    window: tuple[float, float],
    cpuset: Mapping[str, str],
) -> tuple[Metrics, dict[str, object]]:
    """The figures of each side over `window` (the sampler's clock) as metrics, and as params: each side's
    stage name, its busiest threads ([name, tid, % of one core]) and, for a side pinned to one CPU, the
    thread + softirq figure in words (Stage.thread_text). ({}, {}) without CPU readings."""
    use = cpu_use(cpus, *window)
    if not use:
        return {}, {}
    m: Metrics = {}
    for cpu, (busy, soft) in sorted(use.items()):
        m[CPU_BUSY.key(cpu=cpu)] = busy
        m[CPU_SOFTIRQ.key(cpu=cpu)] = soft
    stages: dict[str, str] = {}
    details: dict[str, str] = {}
    tops: dict[str, list[list[object]]] = {}
    for role in ROLES:
        if role not in threads:
            continue
        used = thread_use(threads[role], *window)
        st = stage(side_cpus(cpuset, role, sorted(use)), use, used)
        m[CPUS_GIVEN.key(role=role)] = len(st.cpus)
        m[CPUS_BUSY.key(role=role)] = st.busy_pct
        m[SOFTIRQ_MAX.key(role=role)] = st.softirq_pct
        m[BUSIEST_THREAD.key(role=role)] = st.busiest.pct if st.busiest is not None else None
        m[SATURATED_FLAG.key(role=role)] = 1.0 if st.saturated else 0.0
        if (both := st.thread_softirq_pct) is not None:
            m[THREAD_SOFTIRQ.key(role=role)] = both
            details[role] = st.thread_text()
        stages[role] = st.name
        tops[role] = [[u.comm, u.tid, round(u.pct, 1)] for u in used[:TOP_THREADS]]
    said: dict[str, object] = {"stage": stages, "threads": tops}
    if details:
        said["stage_detail"] = details  # a pinned side's thread + softirq, both parts named
    return m, said
