"""Background sampler: once a second, CPU times and RSS of every process of every role (psutil), and the
role cgroup's exact counters beside them (SAMPLE_INTERVAL_S; the remote agent samples at 10 Hz).

Processes are found through the role's cgroup (all descendants) or, without cgroups, as the process
trees of the role's daemons. A process seen at the first sample counts from its CPU time then; one born
later counts from zero (all of its CPU time fell inside the window).

With `threads`, each tick also reads every thread of the roles' processes and each CPU's busy and softirq
time (monitor/threads.py), for the saturated stage (monitor/stage.py); the pair trials ask for it. With
`placed`, each tick also reads the CPU time of every process of each placement (a side's cpuset: its tunnel
and its traffic generator; the emulator's), what stage.py counts as known on a side's CPU. With
`edge_threads` a role's threads are read at the first and the last sample only (the CPUs still at every
tick): a host's hundreds of fleet clients, whose threads at 10 Hz would load the host, judged over the phase.

The sampler spans the whole workload call (connect, warm-up, the measured seconds, result exchange). The
workload says afterwards which part of it was measured; `RoleCost.between` gives the CPU of that part
from the cumulative series (both the sampled and the cgroup figures), interpolated linearly between the
two samples around each edge. The runner aligns the ticks to the measured window's expected start
(`align`: the workload's start plus its warm-up), so both edges fall next to a sample and between
samples of steady traffic: the controller used 0.17% of a core in the windows, against 0.75% at 10 Hz,
and the CPU cross-checks agreed as often (docs/benchmarks/interference.md).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType

import numpy as np
import psutil

from tunbench.host.cgroup import CpuUsage, RoleCgroup
from tunbench.monitor.threads import CpuTime, ThreadTime, read_cpus, read_processes, read_threads

PidSource = Callable[[], list[int]]
# once a second; TUNBENCH_SAMPLE_INTERVAL_S overrides it (docs/benchmarks/interference.md compares 0.1 s side by side)
SAMPLE_INTERVAL_S = float(os.environ.get("TUNBENCH_SAMPLE_INTERVAL_S") or 1.0)


@dataclass
class RoleSample:
    t_s: float
    cpu_user_s: float
    cpu_sys_s: float
    rss_bytes: int
    cg_user_s: float | None = None  # the role cgroup's counters since the first sample (exact)
    cg_sys_s: float | None = None


@dataclass
class RoleCost:
    """What one role (client or server side of a tunnel) cost during the measurement window."""

    cpu: CpuUsage
    rss_peak_bytes: int
    processes: int
    cgroup_cpu: CpuUsage | None
    series: list[RoleSample] = field(default_factory=list)
    threads: list[tuple[float, dict[int, ThreadTime]]] = field(default_factory=list)  # (t, threads) per tick
    # read where the role ran on a host of its own (an agent's sampler): that host's CPUs per tick, and each
    # placement's processes per tick with the CPUs it holds, for the saturated stage (monitor/stage.py)
    cpus: list[tuple[float, dict[int, CpuTime]]] = field(default_factory=list)
    placed: dict[str, list[tuple[float, dict[int, ThreadTime]]]] = field(default_factory=dict)
    placed_cpus: dict[str, str] = field(default_factory=dict)

    def between(self, t0_s: float, t1_s: float) -> tuple[CpuUsage, CpuUsage | None]:
        """(sampled, cgroup) CPU used between two times on the sampler's clock, interpolated from the
        cumulative 10 Hz series; the cgroup figure is None without a cgroup."""
        pts = self.series
        sampled = CpuUsage(
            _at(pts, t1_s, lambda s: s.cpu_user_s) - _at(pts, t0_s, lambda s: s.cpu_user_s),
            _at(pts, t1_s, lambda s: s.cpu_sys_s) - _at(pts, t0_s, lambda s: s.cpu_sys_s),
        )
        if not pts or any(s.cg_user_s is None or s.cg_sys_s is None for s in pts):
            return sampled, None
        cg = CpuUsage(
            _at(pts, t1_s, lambda s: s.cg_user_s or 0.0) - _at(pts, t0_s, lambda s: s.cg_user_s or 0.0),
            _at(pts, t1_s, lambda s: s.cg_sys_s or 0.0) - _at(pts, t0_s, lambda s: s.cg_sys_s or 0.0),
        )
        return sampled, cg


def _at(series: list[RoleSample], t_s: float, value: Callable[[RoleSample], float]) -> float:
    """A cumulative counter at time t_s: linear between the samples around it, clamped to the ends."""
    if not series:
        return 0.0
    times = [s.t_s for s in series]
    vals = [value(s) for s in series]
    return float(np.interp(t_s, times, vals))


class _RoleTracker:
    def __init__(
        self,
        pids: PidSource,
        cgroup: RoleCgroup | None,
        threads: bool = False,
        *,
        thread_pids: PidSource | None = None,
        edges_only: bool = False,
    ) -> None:
        self.pid_source = pids
        self.thread_pids = thread_pids  # whose threads are read, where not the sampled processes (a cgroup's)
        self.read_threads = threads
        self.edges_only = edges_only
        self.threads: list[tuple[float, dict[int, ThreadTime]]] = []
        self.cgroup = cgroup
        self.base: dict[int, tuple[float, float]] = {}
        self.last: dict[int, tuple[float, float]] = {}
        self.procs: dict[int, psutil.Process] = {}
        self.rss_peak = 0
        self.series: list[RoleSample] = []
        self.cg_start = cgroup.usage() if cgroup else None
        self.first = True

    def sample(self, t_s: float, edge: bool = False) -> None:
        rss = 0
        pids = self.pid_source()
        if self.read_threads and (edge or not self.edges_only):
            self.threads.append((t_s, read_threads(self.thread_pids() if self.thread_pids else pids)))
        for pid in pids:
            proc = self.procs.get(pid)
            try:
                if proc is None:
                    proc = self.procs[pid] = psutil.Process(pid)
                with proc.oneshot():
                    ct = proc.cpu_times()
                    mem = proc.memory_info().rss
            except psutil.Error:
                continue
            now = (ct.user, ct.system)  # children_* would double-count reaped children we also saw
            if pid not in self.base:
                self.base[pid] = now if self.first else (0.0, 0.0)
            self.last[pid] = now
            rss += mem
        self.first = False
        self.rss_peak = max(self.rss_peak, rss)
        user, sys_ = self.totals()
        cg_user = cg_sys = None
        if self.cgroup is not None and self.cg_start is not None and (now_cg := self.cgroup.usage()) is not None:
            cg_user, cg_sys = now_cg.user_s - self.cg_start.user_s, now_cg.sys_s - self.cg_start.sys_s
        self.series.append(RoleSample(t_s, user, sys_, rss, cg_user, cg_sys))

    def totals(self) -> tuple[float, float]:
        user = sum(self.last[p][0] - self.base[p][0] for p in self.last)
        sys_ = sum(self.last[p][1] - self.base[p][1] for p in self.last)
        return max(user, 0.0), max(sys_, 0.0)

    def result(self) -> RoleCost:
        user, sys_ = self.totals()
        cg = None
        if self.cgroup is not None and self.cg_start is not None:
            end = self.cgroup.usage()
            cg = end - self.cg_start if end is not None else None
        return RoleCost(CpuUsage(user, sys_), self.rss_peak, len(self.last), cg, self.series, self.threads)


class Sampler:
    """`with Sampler({"client": (pids, cgroup), ...}) as s:` ... then `s.results`. `threads`: also each
    role's threads and each CPU's times at every tick (`s.cpus`), for the saturated stage; `placed` (with
    `threads`): each placement's processes at every tick (`s.placed`: name -> (t, pid -> its CPU) per tick);
    `edge_threads` (with `threads`): role -> whose threads to read, at the first and the last sample only."""

    def __init__(
        self,
        roles: Mapping[str, tuple[PidSource, RoleCgroup | None]],
        interval_s: float = SAMPLE_INTERVAL_S,
        *,
        threads: bool = False,
        placed: Mapping[str, PidSource] | None = None,
        edge_threads: Mapping[str, PidSource] | None = None,
    ) -> None:
        self.interval_s = interval_s
        self.threads = threads
        edges = edge_threads or {}
        self._trackers = {
            name: _RoleTracker(pids, cg, threads, thread_pids=edges.get(name), edges_only=name in edges)
            for name, (pids, cg) in roles.items()
        }
        self.cpus: list[tuple[float, dict[int, CpuTime]]] = []  # (t, each CPU's times) per tick, with threads
        self._placed = dict(placed or {}) if threads else {}
        self.placed: dict[str, list[tuple[float, dict[int, ThreadTime]]]] = {name: [] for name in self._placed}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._next_t = 0.0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="tunbench-sampler", daemon=True)
        self._t0 = 0.0
        self.results: dict[str, RoleCost] = {}
        self.wall_s = 0.0

    def _sample_all(self, edge: bool = False) -> None:
        with self._lock:
            self._sample(time.monotonic() - self._t0, edge)

    def _sample(self, t: float, edge: bool = False) -> None:
        if self.threads and (cpus := read_cpus()) is not None:
            self.cpus.append((t, cpus))
        for name, pids in self._placed.items():
            self.placed[name].append((t, read_processes(pids())))
        for tracker in self._trackers.values():
            tracker.sample(t, edge)

    def _loop(self) -> None:
        self._next_t = time.monotonic() + self.interval_s
        while not self._stop.is_set():
            if self._wake.wait(max(0.0, self._next_t - time.monotonic())):
                self._wake.clear()  # realigned (or stopping): wait for the new tick
                continue
            self._sample_all()
            self._next_t += self.interval_s

    def align(self, at: float) -> None:
        """Take the next sample at `at` (time.monotonic()) and then every interval from there: the measured
        window's start, so its edges fall next to samples."""
        self._next_t = max(at, time.monotonic())
        self._wake.set()

    def mark(self) -> float:
        """Take a sample now, between the ticks, and give its time (time.monotonic()): a workload marks the
        edges of a part of its call this way, so that part's CPU is read at samples, not interpolated."""
        with self._lock:
            now = time.monotonic()
            self._sample(now - self._t0)
        return now

    @property
    def t0(self) -> float:
        """The sampler's clock origin (time.monotonic() at its first sample): series times count from it."""
        return self._t0

    def __enter__(self) -> Sampler:
        self._t0 = time.monotonic()
        self._sample_all(edge=True)  # the baseline, taken before the workload starts
        self._thread.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join()
        self._sample_all(edge=True)  # the final figures, taken after the workload ended
        self.wall_s = time.monotonic() - self._t0
        self.results = {name: t.result() for name, t in self._trackers.items()}
