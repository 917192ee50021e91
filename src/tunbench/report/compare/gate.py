"""Which comparisons gate, and at which threshold (`compare --gate`, `run --gate`, `calibrate --gate`).

A CI gate has to see a small change in a short budget, so it should judge the quietest figure of the tunnel's
speed. On a small shared host that is the tunnel's CPU time per bit it delivered, not its throughput: the CPU
seconds of all its processes, client and server side, over each whole trial (the cgroup's exact count), per
bit of payload its traffic generator moved through it over the same test, both ways (``CPU/bit delivered``).
No window edge cuts either figure. Its predecessor divided by the bytes on the client's underlay link
(``CPU/bit carried``), whose per-pair noise measured here was 2.4-3.5% with wireguard-go at saturation, against
3.4-4.3% for the CPU per bit of goodput over the measured window (``CPU/bit tunnel``), 3.6-4.6% per side and
4.7-5.8% for throughput (docs/benchmarks/precision.md). Dividing by the wire's bytes let a tunnel that pads
or retransmits more look cheaper, so the gate divides by what the user gets and gates the wire's bytes per
delivered byte (``wire overhead``) in the wide tier beside it. One gated figure needs no Holm share. A change
that makes the tunnel's code slower moves all of them: at saturation it spends more CPU per bit, and where it
is CPU-bound it also moves fewer bits.

Two gates:

* ``cost`` (the default): the tunnel's CPU per bit delivered, and latency where a workload measures it, gate
  at the threshold, in one Holm family. A case whose trials have no whole-test count of the payload (a
  workload without a traffic generator's byte figures) gates ``CPU/bit tunnel`` there instead; where both
  exist, ``CPU/bit tunnel`` is left out, as the sides' figures below say the same with their own noise.
  ``CPU/bit carried`` never gates under ``cost``. Throughput, each side's CPU per bit and the wire overhead
  are gated too, but *wide*: at ``wide`` x the threshold, in a Holm family of their own, so their larger
  noise neither widens the main family's level nor hides behind it, and a large one-sided, speed or padding
  regression still fails. A case with no CPU figure (CPU not sampled) gates its throughput at the threshold
  instead, so every case keeps a figure of speed in the main family.
  Where A and B both counted instructions (`run --count-instructions`), the **work gate** applies: the
  tunnel's own instructions per byte (``instructions/byte``) gate at the threshold, and each side's at ``wide``
  x it. Nothing timed gates then: the daemons ran under valgrind at a fixed offered rate, so their CPU time is
  the simulator's, their throughput the rate offered, and the counts with Go's runtime included move with
  timing. Those rows are shown only.
* ``all``: every metric at the threshold, in one family.

Each metric's family says which tier it takes (its declaration, tunbench.metrics: docs/metrics.md): ``gate``
for latency and the candidates for the main cost figure, ``wide`` for throughput, each side's CPU per bit and
the wire overhead, ``work`` for counted work. The gate is pure data; ``main_metric`` and ``tier`` say where one
comparison belongs and ``describe`` is the line `compare` prints.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from tunbench.monitor.counters import INSTR_SIDE
from tunbench.report.compare.metrics import CPU_CARRIED, CPU_DELIVERED, CPU_TOTAL, INSTR, Metric

Tier: TypeAlias = Literal["gate", "wide", ""]
"""``gate``: the main family, at the threshold; ``wide``: its own family, at the wide threshold; "": shown
only (counted work, the direct baseline)."""

GATE_NAMES = ("cost", "all")
DEFAULT_WIDE = 2.0
"""The wide tier's threshold under the ``cost`` gate, as a multiple of the main one: throughput's per-pair noise
was 1.5-2x that of the tunnel's CPU per bit here, so at 2x a budget that reaches the main target reaches this
one too."""


@dataclass(frozen=True)
class Gate:
    """``name``: one of ``GATE_NAMES``; ``wide``: the wide tier's threshold as a multiple of the main one."""

    name: str = "cost"
    wide: float = DEFAULT_WIDE

    def __post_init__(self) -> None:
        if self.name not in GATE_NAMES:
            raise ValueError(f"unknown gate {self.name!r} (expected one of: {', '.join(GATE_NAMES)})")
        if not (math.isfinite(self.wide) and self.wide >= 1.0):
            raise ValueError(f"the wide factor must be a number >= 1, got {self.wide}")

    def tier(self, metric: Metric, *, main: str | None = CPU_TOTAL) -> Tier | None:
        """Where a comparison of ``metric`` belongs (the direct baseline's rows are the caller's to drop), None
        when the case leaves it out. ``main``: the case's main CPU figure (``main_metric``), None when it has
        none on both sides of the comparison."""
        if not metric.gates:
            return ""
        if self.name == "all":
            return "gate"
        if metric.name == CPU_CARRIED or (metric.name == CPU_TOTAL and main in (CPU_DELIVERED, INSTR)):
            return None
        if main == INSTR and metric.name != INSTR:  # the work gate: only counts gate
            return "wide" if INSTR_SIDE.matches(metric.name) else ""
        if metric.name == main or (metric.family == "gate" and metric.name not in MAIN_CPU):
            return "gate"  # the main figure, and the gate family's others (latency); the other main candidates
            # are in the gate family too, but only the case's main one gates at the threshold
        return "wide" if main is not None else "gate"

    def threshold(self, tier: Tier, threshold: float) -> float:
        """The relative threshold of a tier: the main one, or ``wide`` x it."""
        return threshold * self.wide if tier == "wide" else threshold

    def describe(
        self, threshold: float, main: Sequence[str], wide: Sequence[str], counted_by: str = "callgrind"
    ) -> str:
        """The line that says what gates and why, e.g. for the ``cost`` gate at 3%: 'gate: CPU/bit delivered at ±3.0%
        (...); throughput, CPU/bit client, CPU/bit server at ±6.0% (...)'. ``main`` / ``wide``: the metric
        titles of each tier. ``counted_by``: what counted the instructions (perf/hwinstr.py's counters)."""
        at = f" at {_pct(threshold)}" if threshold > 0 else ""
        if self.name == "all":
            return f"gate: every metric{at}, one Holm family (--gate all)"
        text = f"gate: {', '.join(main) or 'nothing'}{at}"
        if "instructions/byte" in main and counted_by == "perf":
            text += (
                " (the tunnel's own instructions per byte, each side's added, counted by the CPU through perf, Go's "
                "runtime included: a count the box's noise does not reach; the timed rows are shown, not judged)"
            )
        elif "instructions/byte" in main:
            text += (
                " (the tunnel's own instructions per byte, each side's added, counted by callgrind outside Go's "
                "runtime: a count the box's noise does not reach; the timed rows are shown, not judged)"
            )
        elif "CPU/bit delivered" in main:
            text += (
                " (the tunnel's CPU time per bit it delivered, both sides, over whole trials: the quietest figure of "
                "its speed on a shared host)"
            )
        elif any(t.startswith("CPU/bit") for t in main):
            text += " (the tunnel's CPU time per bit, both sides: the quietest figure of its speed on a shared host)"
        if wide:
            wide_at = f" at {_pct(self.threshold('wide', threshold))}" if threshold > 0 else ""
            own, them = ("its", "it") if len(wide) == 1 else ("their", "them")
            text += (
                f"; {', '.join(wide)}{wide_at} in a Holm family of {own} own (noisier per pair; --gate all gates "
                f"{them} with the rest)"
            )
        return text


MAIN_CPU = (INSTR, CPU_DELIVERED, CPU_TOTAL)
"""The candidates for a case's main CPU figure, first choice first."""


def main_metric(present: Collection[str]) -> str | None:
    """The main cost figure of a case from the metric names it has on both sides of a comparison: the counted
    instructions per byte (`run --count-instructions`), else the CPU per bit delivered, else the CPU per bit of
    goodput, else None (the case's throughput gates in their place).
    Never the CPU per bit carried on the wire: padding would make that cheaper."""
    return next((name for name in MAIN_CPU if name in present), None)


def _pct(x: float) -> str:
    return f"±{x:.1%}"


def parse_gate(text: str, wide: float = DEFAULT_WIDE) -> Gate:
    """A Gate from a flag's value; ValueError names the choices."""
    return Gate(text.strip().lower(), wide)
