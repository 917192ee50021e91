"""The metrics compare judges: how each is read from a trial, which way is better, how it is shown, whether
it gates (throughput, CPU per bit of the tunnel and per side, latency; counted work, which explains and never
gates; which of them gate at which threshold is ``gate``'s).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tunbench.monitor.counters import CARRIED
from tunbench.report.common import fmt_bps
from tunbench.report.summary import (
    ROLES,
    per_trial_role,
)
from tunbench.results import TrialRecord

METRIC_KINDS = ("throughput", "cpu", "latency", "work")
"""Metric kinds compare knows. `work` (counted work, `run --count-work`) explains the others: shown with
its verdicts, its own Holm family, never gating."""


@dataclass(frozen=True)
class Metric:
    """One row kind of the comparison: how to read it from a trial, which way is better, how to show it.

    ``absolute``: compare as candidate median - baseline median in ``unit`` (signed data such as the
    latency increase under load, where a ratio means nothing); other metrics are compared as relative
    changes unless some value is <= 0 (then absolute too). ``scale`` converts a raw value to ``unit``.
    """

    name: str
    title: str
    kind: str
    higher_is_better: bool
    value: Callable[[TrialRecord], float | None]
    fmt: Callable[[float], str]
    better: str
    worse: str
    absolute: bool = False
    unit: str = ""
    scale: float = 1.0
    gates: bool = True  # False: shown but never gates (counted work: it explains a verdict, it is not one)


def _throughput(t: TrialRecord) -> float | None:
    return t.metrics.get("throughput_bps")


def _cpu_per_bit(role: str) -> Callable[[TrialRecord], float | None]:
    def value(t: TrialRecord) -> float | None:
        # (user + sys CPU seconds) / (throughput_bps * window_s), the inverse of summary's bits per CPU-second.
        bits_per_cpu_s = per_trial_role(t, role)["bits_per_cpu_s"]
        return 1.0 / bits_per_cpu_s if bits_per_cpu_s else None

    return value


def _cpu_per_bit_total(t: TrialRecord) -> float | None:
    """The CPU seconds per bit of all the tunnel's processes, client and server side together: the sum of the
    sides' CPU per bit (one throughput, one window), over the sides that have tunnel processes."""
    sides = [_cpu_per_bit(role)(t) for role in ROLES]
    present = [x for x in sides if x is not None]
    return sum(present) if present else None


CPU_TOTAL = "cpu_s_per_bit"
"""The name of the tunnel's CPU per bit of goodput over the measured window, both sides together (`CPU/bit
tunnel`): what the default gate holds where a trial has no count of the bytes carried."""

CPU_CARRIED = "cpu_s_per_bit_carried"
"""The name of the tunnel's CPU per bit it carried (`CPU/bit carried`): what the default gate holds."""


def _cpu_per_bit_carried(t: TrialRecord) -> float | None:
    """The CPU seconds of all the tunnel's processes, client and server side, over the whole workload call
    (`trial_cpu.*`, the cgroup's exact figure), per bit the client's underlay link carried over the same call,
    both ways (`carried_bytes`). Retransmitted and dropped packets cost the tunnel work, so they count, and no
    window edge cuts either figure: measured here, its per-pair noise was about 30% below `CPU/bit tunnel`'s
    (docs/benchmarks/precision.md)."""
    carried = t.metrics.get(CARRIED)
    cpu = [
        (t.metrics.get(f"trial_cpu.{role}.user_s") or 0.0) + (t.metrics.get(f"trial_cpu.{role}.sys_s") or 0.0)
        for role in ROLES
        if f"trial_cpu.{role}.user_s" in t.metrics or f"trial_cpu.{role}.sys_s" in t.metrics
    ]
    if not carried or not cpu or sum(cpu) <= 0.0:
        return None
    return sum(cpu) / (8.0 * carried)


def _metric_value(name: str) -> Callable[[TrialRecord], float | None]:
    return lambda t: t.metrics.get(name)


def _fmt_cpu_per_bit(s_per_bit: float) -> str:
    return f"{s_per_bit * 1e9:.3g} s/Gbit"


THROUGHPUT = Metric(
    "throughput_bps", "throughput", "throughput", True, _throughput, fmt_bps, "faster", "slower", unit="Mbit/s",
    scale=1e-6,
)  # fmt: skip


ABSOLUTE_PREFIXES = ("latency.increase_",)
"""Metrics compared as absolute differences: signed values (loaded minus idle latency can be < 0)."""


def metrics_for(trials: list[TrialRecord], kinds: tuple[str, ...] = METRIC_KINDS) -> list[Metric]:
    """The metrics to compare: throughput, CPU per bit of the tunnel (per bit carried where trials counted it,
    per bit of goodput; both sides together) and per role, and any ``latency.*_ms`` metric present."""
    out: list[Metric] = []
    if "throughput" in kinds:
        out.append(THROUGHPUT)
    if "cpu" in kinds:
        if any(CARRIED in t.metrics for t in trials):
            out.append(
                Metric(CPU_CARRIED, "CPU/bit carried", "cpu", False, _cpu_per_bit_carried, _fmt_cpu_per_bit,
                       "cheaper", "costlier", unit="s/Gbit", scale=1e9)
            )  # fmt: skip
        out.append(
            Metric(CPU_TOTAL, "CPU/bit tunnel", "cpu", False, _cpu_per_bit_total, _fmt_cpu_per_bit, "cheaper",
                   "costlier", unit="s/Gbit", scale=1e9)
        )  # fmt: skip
        for role in ROLES:
            out.append(
                Metric(
                    f"cpu_s_per_bit.{role}",
                    f"CPU/bit {role}",
                    "cpu",
                    False,
                    _cpu_per_bit(role),
                    _fmt_cpu_per_bit,
                    "cheaper",
                    "costlier",
                    unit="s/Gbit",
                    scale=1e9,
                )
            )
    if "latency" in kinds:
        names = sorted({k for t in trials for k in t.metrics if k.startswith("latency.") and k.endswith("_ms")})
        for name in names:
            title = name.removeprefix("latency.").removesuffix("_ms")
            out.append(
                Metric(
                    name,
                    f"latency {title}",
                    "latency",
                    False,
                    _metric_value(name),
                    lambda v: f"{v:.3g} ms",
                    "faster",
                    "slower",
                    absolute=name.startswith(ABSOLUTE_PREFIXES),
                    unit="ms",
                )
            )
    if "work" in kinds:
        out.extend(work_metrics(trials))
    return out


WORK_RATIOS: dict[str, tuple[str, bool, str]] = {  # suffix of work.<role>.* -> (title, higher is better, unit)
    "syscalls_per_mb": ("syscalls/MB", False, "/MB"),
    "ctx_switches_per_mb": ("ctx switches/MB", False, "/MB"),
    "read_per_mb": ("reads/MB", False, "/MB"),
    "write_per_mb": ("writes/MB", False, "/MB"),
    "packets_per_send": ("packets/send", True, ""),
    "packets_per_recv": ("packets/recv", True, ""),
    "bytes_per_wakeup": ("bytes/wake-up", True, "B"),
    "softirq_ms_per_mb": ("softirq ms/MB", False, "ms/MB"),
    "instructions_per_byte": ("instructions/byte", False, ""),
    "cycles_per_byte": ("cycles/byte", False, ""),
}


def work_metrics(trials: list[TrialRecord]) -> list[Metric]:
    """The counted-work ratios present in `trials` (monitor/work.py), per role: the per-MB counts lower is
    better, packets per syscall and bytes per wake-up higher is better. They never gate."""
    present = {k for t in trials for k in t.metrics if k.startswith("work.")}
    out: list[Metric] = []
    for role in ROLES:
        for suffix, (title, higher, unit) in WORK_RATIOS.items():
            name = f"work.{role}.{suffix}"
            if name in present:
                better, worse = ("more batched", "less batched") if higher else ("less work", "more work")
                out.append(
                    Metric(name, f"{title} {role}", "work", higher, _metric_value(name), _fmt_in(unit), better, worse,
                           gates=False)
                )  # fmt: skip
    return out


def _fmt_in(unit: str) -> Callable[[float], str]:
    return lambda v: f"{v:.4g}{unit}"
