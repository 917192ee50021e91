"""The host's own state over a trial: how its CPU time was spent (the `cpu` line of /proc/stat, through
psutil.cpu_times()) and its load average (/proc/loadavg), read at both edges of the measured window.

Stored per trial, as percentages of all CPUs' time over the window (they sum to ~100):
`host.user_pct` (nice included), `host.system_pct`, `host.irq_pct`, `host.softirq_pct`, `host.idle_pct`,
`host.iowait_pct`, `host.steal_pct` (time a hypervisor gave this VM's CPUs to someone else), `host.busy_pct`
(user + system + irq + softirq: what ran here, tunbench's own work included), and `host.load1_start` /
`host.load1_end` (the 1-minute load average at each edge). Steal of a few percent means neighbours on the
same physical host took CPU while the trial measured (report/summary.py warns, stats/checks.py).

/proc/stat and /proc/loadavg are not per network namespace: the harness reads them itself, no program runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping

import psutil

from tunbench.metrics import declare

SHARE = declare(
    "host.{share}_pct", "%", "none", "info",
    "A share of all the host's CPU time over the window (/proc/stat): user, system, irq, softirq, idle, "
    "iowait, steal, busy.",
    choices={"share": ("user", "system", "irq", "softirq", "idle", "iowait", "steal", "busy")},
)  # fmt: skip
STEAL = declare(
    "host.steal_pct", "%", "lower", "info",
    "The hypervisor's share of all CPUs' time over the window (`--redo-steal` voids a trial over it).",
)  # fmt: skip
LOAD1_START = declare("host.load1_start", "", "none", "info", "The host's 1-minute load average as the window opened.")
LOAD1_END = declare("host.load1_end", "", "none", "info", "The host's 1-minute load average as the window closed.")

log = logging.getLogger(__name__)

# the fields of the `cpu` line that partition CPU time (guest and guest_nice are already in user and nice)
FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
CpuTimes = Mapping[str, float]


def cpu_times() -> dict[str, float]:
    """The `cpu` line of /proc/stat (all CPUs, seconds since boot), as psutil reads it; steal is 0 where a
    kernel does not count it."""
    t = psutil.cpu_times()._asdict()
    return {f: float(t.get(f, 0.0)) for f in FIELDS}


def cpu_shares(before: CpuTimes, after: CpuTimes) -> dict[str, float]:
    """Percent of all CPUs' time between two `cpu_times()` readings (pure): user (nice included), system,
    irq, softirq, idle, iowait, steal and busy. Empty when no time passed (or the counters went back)."""
    d = {f: max(0.0, float(after.get(f, 0.0)) - float(before.get(f, 0.0))) for f in FIELDS}
    total = sum(d.values())
    if total <= 0.0:
        return {}

    def pct(x: float) -> float:
        return 100.0 * x / total

    user = d["user"] + d["nice"]
    return {
        "user_pct": pct(user),
        "system_pct": pct(d["system"]),
        "irq_pct": pct(d["irq"]),
        "softirq_pct": pct(d["softirq"]),
        "idle_pct": pct(d["idle"]),
        "iowait_pct": pct(d["iowait"]),
        "steal_pct": pct(d["steal"]),
        "busy_pct": pct(user + d["system"] + d["irq"] + d["softirq"]),
    }


def load1() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


@contextlib.contextmanager
def host_load(metrics: dict[str, float | None]) -> Iterator[None]:
    """`host.*` metrics over the `with` block, written into `metrics`. They explain results: reading
    them never fails a trial."""
    try:
        before, l0 = cpu_times(), load1()
    except (OSError, psutil.Error) as e:
        log.warning("host CPU times unavailable: %s", e)
        yield None
        return
    yield None
    try:
        after, l1 = cpu_times(), load1()
    except (OSError, psutil.Error) as e:
        log.warning("host CPU times unavailable after the window: %s", e)
        return
    metrics.update({SHARE.key(share=k.removesuffix("_pct")): v for k, v in cpu_shares(before, after).items()})
    metrics[LOAD1_START.name] = l0
    metrics[LOAD1_END.name] = l1
