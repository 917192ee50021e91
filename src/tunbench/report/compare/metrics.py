"""The metrics compare judges: how each is read from a trial, which way is better, how it is shown, whether
it gates (throughput, CPU per bit of the tunnel and per side, latency; counted work, which explains and never
gates; which of them gate at which threshold is ``gate``'s).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tunbench import workloads
from tunbench.link.fault_record import FAULT_MS, START_TO_DATA
from tunbench.metrics import MetricSpec, core
from tunbench.metrics import latency as lat
from tunbench.monitor import cost
from tunbench.monitor.counters import (
    CARRIED,
    DELIVERED,
    INSTR_ALL_SIDE,
    INSTR_COUNT,
    INSTR_SIDE,
    delivered_bytes,
    handled_bytes,
    instruction_ratios,
)
from tunbench.monitor.counters import INSTR as INSTR_SPEC
from tunbench.monitor.work import RATIOS
from tunbench.report.summary import (
    ROLES,
    per_trial_role,
)
from tunbench.results import TrialRecord
from tunbench.units import parse_rate

METRIC_KINDS = ("throughput", "cpu", "latency", "work")
"""Metric kinds compare knows. `work` (counted work, `run --count-work`) explains the others: shown with
its verdicts, its own Holm family, never gating."""


@dataclass(frozen=True)
class Metric:
    """One row kind of the comparison: how to read it from a trial, which way is better, how to show it.

    ``absolute``: compare as candidate median - baseline median in ``unit`` (signed data such as the
    latency increase under load, where a ratio means nothing); other metrics are compared as relative
    changes unless some value is <= 0 (then absolute too). ``scale`` converts a raw value to ``unit``.
    ``Metric.of`` builds one from the metric's declaration (tunbench.metrics), whose ``family`` the gate reads.
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
    gates: bool = True  # False: shown but never gates (counted work explains a verdict, an info figure describes
    # the measurement: neither is one)
    family: str = ""  # the declaration's family (tunbench.metrics): where the gate puts it

    @classmethod
    def of(
        cls,
        spec: MetricSpec,
        kind: str,
        value: Callable[[TrialRecord], float | None],
        *,
        absolute: bool = False,
        **placeholders: str,
    ) -> Metric:
        """The comparison row of a declared metric (the key of a family, by its placeholder values:
        ``Metric.of(CPU_SIDE, "cpu", value, role="client")``)."""
        chart = spec.chart
        return cls(
            spec.key(**placeholders),
            spec.titled(**placeholders),
            kind,
            spec.better == "higher",
            value,
            spec.fmt,
            *spec.words,
            absolute=absolute,
            unit=chart.unit if chart is not None else "",
            scale=chart.scale if chart is not None else 1.0,
            gates=spec.family not in ("work", "info"),
            family=spec.family,
        )


def _throughput(t: TrialRecord) -> float | None:
    return t.metrics.get(core.THROUGHPUT.name)


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


CPU_TOTAL = core.CPU_TOTAL.name
CPU_CARRIED = core.CPU_CARRIED.name
CPU_DELIVERED = core.CPU_DELIVERED.name
OVERHEAD = core.OVERHEAD.name
INSTR = INSTR_SPEC.name
"""The names of the compare rows the gate picks by name (tunbench.metrics.core and monitor/counters.py declare
them, with what each means)."""


def _instructions(name: str) -> Callable[[TrialRecord], float | None]:
    """A counted-instruction ratio of a trial: as stored, else from its counts, its tunnel devices' bytes and
    its payload."""

    def value(t: TrialRecord) -> float | None:
        if (v := t.metrics.get(name)) is not None:
            return v
        handled = handled_bytes(t.metrics, t.params.get("instr_devices") or {})
        sides = instr_sides(t)
        return instruction_ratios(t.metrics, delivered(t), handled, sides).get(name)

    return value


def instr_counters(trials: list[TrialRecord]) -> set[str]:
    """Which counters counted the instructions of these trials (`params.instr_counter`: perf/hwinstr.py's
    "perf" or "callgrind"; a trial stored before there was a choice was counted by callgrind). Trials with no
    count name none."""
    return {
        str(t.params.get("instr_counter") or "callgrind")
        for t in trials
        if any(INSTR_COUNT.matches(k) for k, v in t.metrics.items() if v is not None)
    }


def counter_mismatch(a: list[TrialRecord], b: list[TrialRecord]) -> str:
    """Why A's and B's counted instructions cannot be judged against each other ("" when they can): they were
    counted by different counters."""
    ca, cb = instr_counters(a), instr_counters(b)
    if not ca or not cb or ca == cb:
        return ""
    return (
        f"A's instructions were counted by {' and '.join(sorted(ca))} and B's by {' and '.join(sorted(cb))}: a "
        "simulator's count (callgrind, the daemon run many times slower) and the CPU's own (perf, at full speed, "
        "Go's runtime included) are not the same figure, and the timed rows of a run under callgrind are the "
        "simulator's: count A and B with one counter (tunbench run --instr-counter callgrind or perf)"
    )


def counted(t: TrialRecord) -> bool:
    """The trial has the work gate's figure (its counted instructions per byte, both sides)."""
    return _instructions(INSTR)(t) is not None


def instr_sides(t: TrialRecord) -> list[str]:
    """The sides a trial's instruction figure adds up (`params.instr_sides`: those running a daemon); both for
    a trial stored before it was recorded."""
    return [str(role) for role in t.params.get("instr_sides", ROLES)]


def other_mode(t: TrialRecord) -> bool:
    """The trial's count is missing on purpose: each side with no count (of those it counts, `instr_sides`)
    ran in the mode its adapter's `[instructions]` does not count (perf/instructions.py). A side whose count
    failed beside one left out makes it a failed count."""
    left = t.params.get("instr_other_mode") or []
    if not left:
        return False
    sides = instr_sides(t)
    return all(role in left for role in sides if t.metrics.get(INSTR_COUNT.key(role=role)) is None)


STALL = "not counted: carried "
"""How a side's reason begins when its count was dropped for the trial's load (trial/pair.py, rate_short)."""


def stalled(t: TrialRecord) -> bool:
    """The trial's count was dropped because it did not carry its fixed offered rate (a stall under the
    simulator, or iperf3 catching up after one): the trial's own accident, so its pair drops out of the
    count's comparison and the work gate still judges the rest, as for a trial in the other mode. On a busy
    box such a stall left a hog A/A run with no verdict at all (docs/work-gate.md)."""
    return any(str(why).startswith(STALL) for why in (t.params.get("instr") or {}).values())


def below_rate(t: TrialRecord) -> tuple[float, float] | None:
    """(carried, offered), in bit/s, of a trial whose count was dropped for carrying less than its fixed offered
    rate (`stalled`); None for any other trial, and for one dropped for carrying more (iperf3 catching up)."""
    rate, got = (t.params.get("workload") or {}).get("rate"), t.metrics.get(core.THROUGHPUT.name)
    if not (stalled(t) and rate and got is not None):
        return None
    offered = parse_rate(str(rate))
    return (got, offered) if got < offered else None


def rate_hint(trials: list[TrialRecord]) -> str:
    """What to do when trials fell below their fixed offered rate ("" when none did): how many, the most a
    short one carried, and a rate of at most 60% of that (rounded down to 1, 2 or 5 times a power of ten),
    which this box's counted tunnel should sustain (10 Mbit/s where wireguard-go carried 16-18). A box that
    runs the tunnel under callgrind too slowly for the rate leaves most pairs out and the work gate without a
    verdict (docs/work-gate.md). Trials above their rate (iperf3 catching up after one stall) are an accident
    of that trial, not the box, and get no hint."""
    ok = [t for t in trials if t.status == "ok" and (stalled(t) or any(INSTR_COUNT.matches(k) for k in t.metrics))]
    shorts = [(t.workload, s) for t in ok if (s := below_rate(t))]  # the workload's table is where to set it
    if not shorts:
        return ""
    most, offered = max(c for _, (c, _) in shorts), max(o for _, (_, o) in shorts)
    suggested = _round_rate(most * 0.6)
    where = " and ".join(f'[workload.{kind}] rate = "{suggested}"' for kind in sorted({k for k, _ in shorts}))
    return (
        f"{len(shorts)} of {len(ok)} counted trial(s) carried less than their fixed {offered / 1e6:g} Mbit/s "
        f"(at most {most / 1e6:.1f}), each left out of the work gate with its pair: this box runs the counted "
        f"tunnel too slowly for that rate; offer less in the scenario, {where} (docs/work-gate.md)"
    )


def _round_rate(bps: float) -> str:
    """`bps` rounded down to 1, 2 or 5 times a power of ten, as a rate the scenario takes ("5mbit", "200kbit")."""
    if bps < 1_000:
        return "1kbit"
    exp = math.floor(math.log10(bps))
    mant = next(m for m in (5, 2, 1) if m * 10**exp <= bps)
    value = mant * 10**exp
    return f"{value // 1_000_000}mbit" if value >= 1_000_000 else f"{value // 1_000}kbit"


def _trial_cpu_s(t: TrialRecord) -> float | None:
    """The CPU seconds of all the tunnel's processes, client and server side, over the whole workload call
    (`trial_cpu.*`, the cgroup's exact figure); None when no role counted it."""
    keys = [(cost.TRIAL_CPU_USER.key(role=role), cost.TRIAL_CPU_SYS.key(role=role)) for role in ROLES]
    cpu = [
        (t.metrics.get(user) or 0.0) + (t.metrics.get(sys) or 0.0)
        for user, sys in keys
        if user in t.metrics or sys in t.metrics
    ]
    return sum(cpu) if cpu and sum(cpu) > 0.0 else None


def delivered(t: TrialRecord) -> float | None:
    """The payload bytes the trial's generator moved over the whole test (`delivered_bytes`), or, for a trial
    stored before that metric, the same sum from its workload's generator figures; None without them."""
    if (value := t.metrics.get(DELIVERED.name)) is not None:
        return value if value > 0 else None
    workload = workloads.REGISTRY.get(t.workload)
    generator = workload.generator if workload is not None else None
    if generator is None:
        return None
    return delivered_bytes(t.metrics, [sent for _, sent in generator.byte_keys().values()])


def _cpu_per_bit_carried(t: TrialRecord) -> float | None:
    """The tunnel's CPU over the whole trial per bit the client's underlay link carried, both ways."""
    carried, cpu = t.metrics.get(CARRIED.name), _trial_cpu_s(t)
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
    carried, payload = t.metrics.get(CARRIED.name), delivered(t)
    return carried / payload if carried and payload else None


def _metric_value(name: str) -> Callable[[TrialRecord], float | None]:
    return lambda t: t.metrics.get(name)


THROUGHPUT = Metric.of(core.THROUGHPUT, "throughput", _throughput)

ABSOLUTE = (lat.INCREASE,)
"""Metrics compared as absolute differences: signed values (loaded minus idle latency can be < 0)."""


def metrics_for(trials: list[TrialRecord], kinds: tuple[str, ...] = METRIC_KINDS) -> list[Metric]:
    """The metrics to compare: throughput, CPU per bit of the tunnel (per bit carried where trials counted it,
    per bit of goodput; both sides together) and per role, and any ``latency.*_ms`` metric present."""
    out: list[Metric] = []
    if "throughput" in kinds:
        out.append(THROUGHPUT)
    if "cpu" in kinds:
        rows: list[tuple[MetricSpec, Callable[[TrialRecord], float | None], dict[str, str]]]
        rows = [(INSTR_SPEC, _instructions(INSTR), {})]
        rows += [(INSTR_SIDE, _instructions(INSTR_SIDE.key(role=r)), {"role": r}) for r in ROLES]
        rows += [(INSTR_ALL_SIDE, _instructions(INSTR_ALL_SIDE.key(role=r)), {"role": r}) for r in ROLES]
        for instr, value, where in rows:
            if any(value(t) is not None for t in trials):
                out.append(Metric.of(instr, "cpu", value, absolute=False, **where))
        if any(_cpu_per_bit_delivered(t) is not None for t in trials):
            out.append(Metric.of(core.CPU_DELIVERED, "cpu", _cpu_per_bit_delivered))
        if any(_wire_overhead(t) is not None for t in trials):
            out.append(Metric.of(core.OVERHEAD, "cpu", _wire_overhead))
        if any(CARRIED.name in t.metrics for t in trials):
            out.append(Metric.of(core.CPU_CARRIED, "cpu", _cpu_per_bit_carried))
        out.append(Metric.of(core.CPU_TOTAL, "cpu", _cpu_per_bit_total))
        out.extend(Metric.of(core.CPU_SIDE, "cpu", _cpu_per_bit(role), role=role) for role in ROLES)
    if "latency" in kinds:
        found = {k: decl for t in trials for k in t.metrics if (decl := lat.time_of(k)) is not None}
        for name, decl in sorted(found.items()):
            row = Metric.of(decl, "latency", _metric_value(name), absolute=decl in ABSOLUTE, **decl.values(name))
            out.append(row)
        out.extend(fault_rows(trials))
    out.extend(declared_metrics(trials, kinds))
    if "work" in kinds:
        out.extend(work_metrics(trials))
    return out


def fault_rows(trials: list[TrialRecord]) -> list[Metric]:
    """The recovery from a profile's faults (link/fault_record.py), where the trials have it: the times from
    the first fault to the handshake and to the first data after it, and from the first message to data."""
    present = {k for t in trials for k in t.metrics}
    out = []
    for span in ("handshake", "first_data"):
        if (key := FAULT_MS.key(span=span)) in present:
            out.append(Metric.of(FAULT_MS, "latency", _metric_value(key), span=span))
    if START_TO_DATA.name in present:
        out.append(Metric.of(START_TO_DATA, "latency", _metric_value(START_TO_DATA.name)))
    return out


def declared_metrics(trials: list[TrialRecord], kinds: tuple[str, ...] = METRIC_KINDS) -> list[Metric]:
    """The rows the trials' workloads ask compare to judge (`Workload.compared`: rr's transactions/s, p99 and
    CPU per transaction, the pps ladder's packets/s and CPU per packet), one per stored key a declaration
    matches, in the kinds asked for."""
    present = sorted({k for t in trials for k in t.metrics})
    out: list[Metric] = []
    for kind_name in sorted({t.workload for t in trials}):
        workload = workloads.REGISTRY.get(kind_name)
        for spec, kind in workload.compared if workload is not None else ():
            if kind not in kinds:
                continue
            for key in (k for k in present if spec.matches(k)):
                if all(m.name != key for m in out):
                    out.append(Metric.of(spec, kind, _metric_value(key), absolute=False, **spec.values(key)))
    return out


WORK_RATIOS: dict[str, tuple[str, bool, str]] = {
    spec.name.rsplit(".", 1)[1]: (
        spec.title.removesuffix(" {role}"),
        spec.better == "higher",
        spec.fmt.suffix,
    )
    for spec in RATIOS
}
"""The counted-work ratios by suffix of `work.<role>.*` -> (title, higher is better, unit), from their
declarations (monitor/work.py)."""


def work_metrics(trials: list[TrialRecord]) -> list[Metric]:
    """The counted-work ratios present in `trials` (monitor/work.py), per role: the per-MB counts lower is
    better, packets per syscall and bytes per wake-up higher is better. They never gate."""
    present = {k for t in trials for k in t.metrics}
    out: list[Metric] = []
    for role in ROLES:
        for spec in RATIOS:
            name = spec.key(role=role)
            if name in present:
                out.append(Metric.of(spec, "work", _metric_value(name), role=role))
    return out
