"""Per-thread CPU time of a role's processes and per-CPU busy and softirq time, read at the sampler's ticks
(monitor/sampler.py) so that stage.py can say, over the measured window, which thread or which CPU's
softirqs saturated (docs/scaling.md).

A thread's CPU time is utime + stime of /proc/PID/task/TID/stat (clock ticks), its name the comm field of
the same line. psutil gives each thread's times (`Process.threads()`) but not its name, so the stat line is
read and parsed here (one read per thread gives both). A CPU's times come from /proc/stat through psutil.
The parsers are pure; `read_threads` and `read_cpus` read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PROC = Path("/proc")


@dataclass(frozen=True)
class ThreadTime:
    """One thread's cumulative CPU seconds (user + system) and its name, at one reading."""

    pid: int
    comm: str
    cpu_s: float


def parse_task_stat(text: str, clk_tck: int = CLK_TCK) -> tuple[str, float]:
    """(comm, utime + stime in seconds) of a /proc/PID/task/TID/stat line. The comm is between the first
    "(" and the last ")" (it may hold spaces and parentheses); utime and stime are the 14th and 15th
    fields of the line, the 12th and 13th after the ")". ValueError when the line is not one."""
    start, end = text.find("("), text.rfind(")")
    if start < 0 or end < start:
        raise ValueError(f"not a stat line: {text[:60]!r}")
    rest = text[end + 1 :].split()
    if len(rest) < 13:
        raise ValueError(f"stat line too short: {text[:60]!r}")
    return text[start + 1 : end], (int(rest[11]) + int(rest[12])) / clk_tck


def read_threads(pids: Iterable[int], proc: Path = PROC) -> dict[int, ThreadTime]:
    """Every thread of these processes, by thread id; a process or thread that ended meanwhile is left out."""
    out: dict[int, ThreadTime] = {}
    for pid in pids:
        try:
            tids = os.listdir(proc / str(pid) / "task")
        except OSError:
            continue
        for tid in tids:
            try:
                comm, cpu_s = parse_task_stat((proc / str(pid) / "task" / tid / "stat").read_text())
            except (OSError, ValueError):
                continue
            out[int(tid)] = ThreadTime(pid, comm, cpu_s)
    return out


def read_processes(pids: Iterable[int], proc: Path = PROC) -> dict[int, ThreadTime]:
    """Each process's CPU time, all its threads together (those that ended too), by pid, from
    /proc/PID/stat (the same fields as a thread's line); a process that ended meanwhile is left out."""
    out: dict[int, ThreadTime] = {}
    for pid in pids:
        try:
            comm, cpu_s = parse_task_stat((proc / str(pid) / "stat").read_text())
        except (OSError, ValueError):
            continue
        out[pid] = ThreadTime(pid, comm, cpu_s)
    return out


@dataclass(frozen=True)
class CpuTime:
    """One CPU's cumulative busy seconds (everything but idle and iowait: steal counts as busy, the CPU
    was not there to use) and softirq seconds, since boot."""

    busy_s: float
    softirq_s: float


def read_cpus() -> dict[int, CpuTime] | None:
    """Each CPU's times by CPU number (/proc/stat through psutil); None when /proc/stat lists fewer CPUs
    than the host has (an offline CPU shifts the list: the numbers could not be matched)."""
    times = psutil.cpu_times(percpu=True)
    if len(times) != os.cpu_count():
        return None
    return {n: cpu_time(t) for n, t in enumerate(times)}


def cpu_time(t: object) -> CpuTime:
    """A psutil per-CPU times tuple as busy and softirq seconds (guest time is already in user)."""
    fields = ("user", "nice", "system", "irq", "softirq", "steal")
    busy = sum(float(getattr(t, f, 0.0)) for f in fields)
    return CpuTime(busy, float(getattr(t, "softirq", 0.0)))
