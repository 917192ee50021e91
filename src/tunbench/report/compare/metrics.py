"""The metrics compare judges: how each is read from a trial, which way is better, how it is shown, whether
it gates (throughput, CPU per bit of the tunnel and per side, latency; counted work, which explains and never
gates; which of them gate at which threshold is ``gate``'s).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tunbench import workloads
from tunbench.monitor.counters import CARRIED, DELIVERED, delivered_bytes, instruction_ratios
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
"""The name of the tunnel's CPU per bit it carried on the wire (`CPU/bit carried`). Shown under `--gate all`
only: it divides by the wire's bytes, padding and retransmissions included, so a tunnel that does more work
for the same payload would read as cheaper. The cost gate holds `CPU/bit delivered` and `wire overhead`."""

CPU_DELIVERED = "cpu_s_per_bit_delivered"
"""The name of the tunnel's CPU per bit delivered to the user (`CPU/bit delivered`): what the default gate
holds."""

OVERHEAD = "wire_overhead"
"""The name of the bytes the tunnel carried on the wire per byte it delivered (`wire overhead`): headers,
padding, retransmissions. Gated in the wide tier beside the CPU, so padding shows as a cost of its own."""


INSTR = "instr.per_byte"
"""The name of the tunnel's own instructions, both sides, per payload byte delivered (`instructions/byte`),
counted by callgrind (`run --count-instructions`): where both A and B have it, what the cost gate holds, as a
count the box's noise does not reach."""


def _instructions(name: str) -> Callable[[TrialRecord], float | None]:
    """A counted-instruction ratio of a trial: as stored, else from its counts and payload."""

    def value(t: TrialRecord) -> float | None:
        if (v := t.metrics.get(name)) is not None:
            return v
        return instruction_ratios(t.metrics, delivered(t)).get(name)

    return value


def _trial_cpu_s(t: TrialRecord) -> float | None:
    """The CPU seconds of all the tunnel's processes, client and server side, over the whole workload call
    (`trial_cpu.*`, the cgroup's exact figure); None when no role counted it."""
    cpu = [
        (t.metrics.get(f"trial_cpu.{role}.user_s") or 0.0) + (t.metrics.get(f"trial_cpu.{role}.sys_s") or 0.0)
        for role in ROLES
        if f"trial_cpu.{role}.user_s" in t.metrics or f"trial_cpu.{role}.sys_s" in t.metrics
    ]
    return sum(cpu) if cpu and sum(cpu) > 0.0 else None


def delivered(t: TrialRecord) -> float | None:
    """The payload bytes the trial's generator moved over the whole test (`delivered_bytes`), or, for a trial
    stored before that metric, the same sum from its workload's generator figures; None without them."""
    if (value := t.metrics.get(DELIVERED)) is not None:
        return value if value > 0 else None
    workload = workloads.REGISTRY.get(t.workload)
    generator = workload.generator if workload is not None else None
    if generator is None:
        return None
    return delivered_bytes(t.metrics, [sent for _, sent in generator.byte_keys().values()])


def _cpu_per_bit_carried(t: TrialRecord) -> float | None:
    """The tunnel's CPU over the whole trial per bit the client's underlay link carried, both ways."""
    carried, cpu = t.metrics.get(CARRIED), _trial_cpu_s(t)
    return cpu / (8.0 * carried) if carried and cpu else None


def _cpu_per_bit_delivered(t: TrialRecord) -> float | None:
    """The CPU seconds of all the tunnel's processes, client and server side, over the whole workload call
    (the cgroup's exact figure), per bit of payload the generator moved through it over the same test, both
    ways. No window edge cuts either figure (the quiet property of the former per-bit-carried gate), and the
    denominator is what the user gets: more bytes on the wire for the same payload (padding, retransmissions)
    make it costlier, never cheaper."""
    payload, cpu = delivered(t), _trial_cpu_s(t)
    return cpu / (8.0 * payload) if payload and cpu else None


def _wire_overhead(t: TrialRecord) -> float | None:
    """Bytes on the client's underlay link (both ways) per payload byte delivered, over the whole test."""
    carried, payload = t.metrics.get(CARRIED), delivered(t)
    return carried / payload if carried and payload else None


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
        for name, title in (
            (INSTR, "instructions/byte"),
            *((f"instr.{r}.per_byte", f"instructions/byte {r}") for r in ROLES),
        ):
            if any(_instructions(name)(t) is not None for t in trials):
                out.append(
                    Metric(name, title, "cpu", False, _instructions(name), lambda v: f"{v:.4g}", "less work",
                           "more work")
                )  # fmt: skip
        if any(_cpu_per_bit_delivered(t) is not None for t in trials):
            out.append(
                Metric(CPU_DELIVERED, "CPU/bit delivered", "cpu", False, _cpu_per_bit_delivered, _fmt_cpu_per_bit,
                       "cheaper", "costlier", unit="s/Gbit", scale=1e9)
            )  # fmt: skip
        if any(_wire_overhead(t) is not None for t in trials):
            out.append(
                Metric(OVERHEAD, "wire overhead", "cpu", False, _wire_overhead, lambda v: f"{v:.4g}x", "leaner",
                       "heavier", unit="x")
            )  # fmt: skip
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
