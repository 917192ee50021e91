"""Softirq and irq time per side, where it can be attributed (`tunbench run --count-work`): the kernel's
per-CPU `softirq` and `irq` times (/proc/stat, through psutil) over the measured window, summed over the
CPUs a side is placed on (`[run] cpuset`, `--cpuset split`). A side's softirq time is its network stack
work done outside any process's syscalls: a veth's receive runs in a softirq on the sending CPU, so with
the sides on CPUs of their own each one's packets are processed on its own CPU (docs/counted-work.md).

The kernel does not say for whom a softirq ran, only on which CPU: a side's time is attributable only when
the CPUs it is placed on are its alone (not shared with the other side or the emulator). It is the whole
side's (tunnel and traffic generator, as the placement is), not the tunnel process's alone. An unplaced or
sharing side is "not attributed", with the reason. The arithmetic is pure; `snapshot` reads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import psutil

from tunbench.host.cgroup import parse_cpu_list
from tunbench.metrics import declare

SOFTIRQ_S = declare(
    "work.{role}.softirq_s", "s", "lower", "info",
    "Softirq seconds on a side's own CPUs over the window (`--count-work`, where its CPUs are its own).",
)  # fmt: skip
IRQ_S = declare("work.{role}.irq_s", "s", "lower", "info", "Hard-irq seconds on a side's own CPUs over the window.")

ROLES = ("client", "server")
PerCpu = list[tuple[float, float]]  # per CPU number: (softirq, irq) seconds since boot


def snapshot() -> PerCpu | None:
    """Each CPU's (softirq, irq) seconds, indexed by CPU number; None when /proc/stat lists fewer CPUs
    than the host has (an offline CPU shifts psutil's list: the numbers could not be matched)."""
    times = psutil.cpu_times(percpu=True)
    if len(times) != os.cpu_count():
        return None
    return [(t.softirq, t.irq) for t in times]


def attribution(cpuset: Mapping[str, str]) -> tuple[dict[str, list[int]], dict[str, str]]:
    """From a trial's placement (`params.cpuset`: side -> CPU list; `link` the emulator's): the CPUs of each
    side whose time can be attributed, and for the others why not."""
    placed = {side: set(parse_cpu_list(cpus)) for side, cpus in cpuset.items() if cpus}
    cpus: dict[str, list[int]] = {}
    why: dict[str, str] = {}
    for role in ROLES:
        mine = placed.get(role)
        if not mine:
            why[role] = "not attributed: the side is not placed on CPUs of its own (--cpuset split)"
            continue
        shared = {other: sorted(mine & c) for other, c in placed.items() if other != role and mine & c}
        if shared:
            with_ = ", ".join(f"CPU {','.join(map(str, c))} with the {other}" for other, c in shared.items())
            why[role] = f"not attributed: shares {with_}"
            continue
        cpus[role] = sorted(mine)
    return cpus, why


def irq_metrics(before: Sequence[tuple[float, float]], after: Sequence[tuple[float, float]],
                cpus: Mapping[str, Sequence[int]]) -> dict[str, float | None]:  # fmt: skip
    """`work.<role>.softirq_s` and `.irq_s`: the time over the window on the side's CPUs."""
    m: dict[str, float | None] = {}
    for role, cs in cpus.items():
        m[SOFTIRQ_S.key(role=role)] = sum(after[c][0] - before[c][0] for c in cs)
        m[IRQ_S.key(role=role)] = sum(after[c][1] - before[c][1] for c in cs)
    return m
