"""What a trial's tunnel processes cost, as record metrics and series: one function for every workload.

Per role: `cpu.<role>.*` is the headline (the cgroup's exact figure where there is one, over the measured
window when the workload gives one), `trial_cpu.<role>.*` covers the whole sampled phase, and for roles
sampled per process (psutil at 10 Hz) `sampled_cpu.*`, the RSS peak, the process count, the
cgroup-vs-sampling cross-check and the CPU%/RSS series.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Protocol

from tunbench.metrics import declare
from tunbench.monitor import crosscheck
from tunbench.monitor.sampler import RoleCost

CPU_USER = declare(
    "cpu.{role}.user_s", "s", "lower", "info",
    "A side's user CPU seconds over the measured window: the cgroup's exact figure where there is one.",
)  # fmt: skip
CPU_SYS = declare("cpu.{role}.sys_s", "s", "lower", "info", "A side's system CPU seconds over the measured window.")
TRIAL_CPU_USER = declare(
    "trial_cpu.{role}.user_s", "s", "lower", "info",
    "A side's user CPU seconds over the whole workload call (connect, warm-up, result exchange included).",
)  # fmt: skip
TRIAL_CPU_SYS = declare(
    "trial_cpu.{role}.sys_s", "s", "lower", "info", "A side's system CPU seconds over the whole workload call."
)
CGROUP_CPU_USER = declare(
    "cgroup_cpu.{role}.user_s", "s", "lower", "info", "A side's user CPU seconds by its cgroup, measured window."
)
CGROUP_CPU_SYS = declare(
    "cgroup_cpu.{role}.sys_s", "s", "lower", "info", "A side's system CPU seconds by its cgroup, measured window."
)
SAMPLED_CPU_USER = declare(
    "sampled_cpu.{role}.user_s", "s", "lower", "info",
    "A side's user CPU seconds by psutil sampling (10 Hz), measured window: the cgroup's cross-check.",
)  # fmt: skip
SAMPLED_CPU_SYS = declare(
    "sampled_cpu.{role}.sys_s", "s", "lower", "info", "A side's system CPU seconds by psutil sampling."
)
RSS_PEAK = declare("rss_peak_bytes.{role}", "bytes", "lower", "info", "The largest RSS a side's processes reached.")
PROCESSES = declare("processes.{role}", "count", "none", "info", "How many processes a side's sampling saw.")


class Figures(Protocol):
    """Where the figures go: a trial record, or a workload's Measurement."""

    metrics: dict[str, float | None]
    series: dict[str, list[tuple[float, float]]]


def cost_metrics(
    rec: Figures,
    costs: Mapping[str, RoleCost],
    wall_s: float,
    window: tuple[float, float] | None = None,
    *,
    prefix: str = "",
    sampled_roles: Collection[str] | None = None,
) -> None:
    """Add the cost figures of `costs` (a Sampler's results) to `rec`, keys under `prefix`. `window` is the
    measured part, on the sampler's clock: the headline covers it (None: the whole sampled phase).
    `sampled_roles`: the roles whose processes were sampled one by one (None: all); the others (e.g. 500
    tunnel clients, counted by their cgroup only) get the cgroup figures alone."""
    m: dict[str, Any] = rec.metrics
    w0, w1 = (0.0, wall_s) if window is None else (max(0.0, window[0]), min(wall_s, window[1]))
    for role, cost in costs.items():
        if window is None:
            sampled, cgroup = cost.cpu, cost.cgroup_cpu
        else:
            # psutil reads /proc/<pid>/stat, which lags by up to a few hundred ms of CPU right after a
            # process starts: the cgroup's exact figure is the headline, the sampled one its cross-check
            sampled, cgroup = cost.between(w0, w1)
        headline = cgroup if cgroup is not None else sampled
        m[prefix + CPU_USER.key(role=role)] = headline.user_s
        m[prefix + CPU_SYS.key(role=role)] = headline.sys_s
        whole = cost.cgroup_cpu if cost.cgroup_cpu is not None else cost.cpu
        m[prefix + TRIAL_CPU_USER.key(role=role)] = whole.user_s
        m[prefix + TRIAL_CPU_SYS.key(role=role)] = whole.sys_s
        if cgroup is not None:
            m[prefix + CGROUP_CPU_USER.key(role=role)] = cgroup.user_s
            m[prefix + CGROUP_CPU_SYS.key(role=role)] = cgroup.sys_s
        if sampled_roles is not None and role not in sampled_roles:
            continue
        m[prefix + SAMPLED_CPU_USER.key(role=role)] = sampled.user_s
        m[prefix + SAMPLED_CPU_SYS.key(role=role)] = sampled.sys_s
        m[prefix + RSS_PEAK.key(role=role)] = cost.rss_peak_bytes
        m[prefix + PROCESSES.key(role=role)] = cost.processes
        if cgroup is not None and cost.processes:
            diff, ok = crosscheck.cpu_check(cgroup.total_s, sampled.total_s)
            m[prefix + crosscheck.CPU_DIFF.key(role=role)] = diff
            m[prefix + crosscheck.CPU_OK.key(role=role)] = 1.0 if ok else 0.0
        rec.series[f"{prefix}cpu_pct.{role}"] = cpu_pct(cost)
        rec.series[f"{prefix}rss_bytes.{role}"] = [(s.t_s, float(s.rss_bytes)) for s in cost.series]


def cpu_pct(cost: RoleCost) -> list[tuple[float, float]]:
    """The role's CPU use between consecutive samples, in % of one core."""
    out = []
    for a, b in zip(cost.series, cost.series[1:], strict=False):
        if b.t_s > a.t_s:
            used = (b.cpu_user_s + b.cpu_sys_s) - (a.cpu_user_s + a.cpu_sys_s)
            out.append((b.t_s, 100.0 * used / (b.t_s - a.t_s)))
    return out


def cumulative_cpu(cost: RoleCost) -> list[tuple[float, float]]:
    """(time, CPU-seconds so far) of the sampled processes."""
    return [(s.t_s, s.cpu_user_s + s.cpu_sys_s) for s in cost.series]


def cpu_per_unit(cost: RoleCost, start_s: float, end_s: float, units: float) -> float | None:
    """A role's CPU seconds per unit of work done between two times on the sampler's clock (its cgroup's exact
    figure where there is one); None when the role had no process (`direct`) or no work was done."""
    if units <= 0 or end_s <= start_s or not cost.processes:
        return None
    sampled, cgroup = cost.between(start_s, end_s)
    used = cgroup if cgroup is not None else sampled
    return used.total_s / units
