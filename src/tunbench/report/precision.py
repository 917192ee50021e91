"""Stopping a run on precision (`tunbench run --target-mde 3% --budget 2m`): a StopCheck for the runner.

Asked at each block boundary (runner.StopCheck: the next block's trials and the records so far), it pairs
the two labels' ok trials by repetition, as `compare --label-a A --label-b B` of the same run will, takes
the comparisons the gate holds (``report.compare.gate``: by default the tunnel's CPU per bit at the target;
throughput and each side's CPU per bit in the wide tier at ``wide`` x the target) of every case the two
labels share, and stops once, in each tier, the largest paired MDE at Holm's level over that tier's
comparisons is at most the tier's target (`tunbench.stats.precision`: the width of the interval, never
significance) and it has at least ``MIN_STOP_PAIRS`` pairs (a few pairs' SD is too uncertain to stop on).
Otherwise it asks the budget (runner.Deadline, passed in) and stops there when the next block would overrun
it. `state` is the last answer, for the progress line and the final message.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tunbench.report.compare import CompareResult, Gate, metrics_for, pair_trials, pair_values
from tunbench.report.compare.gate import MAIN_CPU, main_metric
from tunbench.report.summary import leave_out_interfered
from tunbench.results import CaseKey, RunRecord, TrialRecord
from tunbench.stats.compare import required_repetitions
from tunbench.stats.paired import required_pairs
from tunbench.stats.precision import Precision, fmt_mde, paired_precision
from tunbench.units import minutes
from tunbench.workloads import case_title

GATED_KINDS = ("throughput", "cpu", "latency")
"""The metric kinds compare gates (counted work explains, it never gates)."""
Budget = Callable[[Any, list[TrialRecord]], str]  # runner.Deadline (its block: list[PlannedTrial])
Pairs = dict[str, tuple[list[float], list[float]]]
ABSOLUTE = ":absolute"
"""The suffix of a tier's bucket of absolute comparisons ('gate:absolute'): they count in its Holm family, as
compare counts them, but have no relative MDE to reach a target with."""


def gated_pairs(
    trials: list[TrialRecord],
    label_a: str,
    label_b: str,
    kinds: tuple[str, ...] = GATED_KINDS,
    gate: Gate | None = None,
) -> dict[str, Pairs]:
    """Per tier of the gate ("gate", "wide"): 'case metric' -> (A's values, B's values) of the pairs by
    repetition, for every case both labels have and every metric of `kinds` with a value in both partners:
    what `compare --label-a A --label-b B` of the same run will judge, in the tier compare will put it. The
    trials compare leaves out are left out here too (an interfered trial and its partners, as
    ``leave_out_interfered`` with ``paired``), so the pairs counted are the pairs judged. Absolute comparisons
    (latency increases, in ms) go to the tier's ``ABSOLUTE`` bucket: they count in its family only."""
    from tunbench.report.compare.verdicts import work_gate_keeps

    gate = gate or Gate()
    kept, _ = leave_out_interfered(trials, paired=True, include=work_gate_keeps(gate, trials))
    by_case: dict[tuple[str, ...], dict[str, list[TrialRecord]]] = {}
    for t in kept:
        if t.label in (label_a, label_b):
            by_case.setdefault(_rest(t.case), {}).setdefault(t.label, []).append(t)
    out: dict[str, Pairs] = {"gate": {}, "wide": {}, "gate" + ABSOLUTE: {}, "wide" + ABSOLUTE: {}}
    metrics = metrics_for(kept, kinds)
    for sides in by_case.values():
        if label_a not in sides or label_b not in sides:
            continue
        pairs, _ = pair_trials(sides[label_a], sides[label_b])
        values = {m.name: pair_values(pairs, m) for m in metrics}
        main = main_metric([name for name in MAIN_CPU if values.get(name, ([], []))[0]])
        for metric in metrics:
            va, vb = values[metric.name]
            tier = gate.tier(metric, main=main)
            if va and tier:
                bucket = tier + ABSOLUTE if metric.absolute else tier
                out[bucket][f"{case_title(sides[label_a][0].case)} {metric.title}"] = (va, vb)
    return out


def _rest(case: CaseKey) -> tuple[str, ...]:
    return (
        case.profile,
        case.workload,
        str(case.flows),
        case.direction,
        str(case.clients),
        case.variant,
        str(case.cores),
    )


MIN_STOP_PAIRS = 10
"""The fewest pairs a run stops on at its target. The SD of a few pairs is itself a guess: A/A runs of the
README's line on this VM stopped "at the target" after 5 pairs whose SD was 0.6% (long runs measured that figure's
per-pair noise, CPU/bit tunnel, at 3.4-4.3% over 77-116 pairs: docs/notes/precision-research.md), claiming an
MDE of ±1.0%. From 10 pairs the SD is known to about ±25%."""


@dataclass(frozen=True)
class GatePrecision:
    """Where each tier of the gate stands: ``main`` at the target, ``wide`` (None when the gate has no wide
    comparison) at its own, wider target; the target counts as reached from ``min_pairs`` pairs on."""

    main: Precision
    wide: Precision | None = None
    min_pairs: int = 0

    @property
    def reached(self) -> bool:
        tiers = self.main.reached and (self.wide is None or self.wide.reached)
        return tiers and self.n_pairs >= self.min_pairs

    @property
    def n_pairs(self) -> int:
        return self.main.n_pairs

    @property
    def more_pairs(self) -> int:
        """About how many more pairs both targets need at the current spread (0: reached or unknown)."""
        tiers = max(self.main.more_pairs, self.wide.more_pairs if self.wide is not None else 0)
        return max(tiers, self.min_pairs - self.n_pairs if math.isfinite(self.main.mde) else 0)


@dataclass
class PrecisionStop:
    """A runner.StopCheck: stop at the target MDE, else at the budget (`budget`, e.g. runner.Deadline)."""

    label_a: str
    label_b: str
    target: float
    budget: Budget | None = None
    alpha: float = 0.05
    gate: Gate = field(default_factory=Gate)
    min_pairs: int = MIN_STOP_PAIRS
    state: GatePrecision | None = None
    by: str = ""  # "target" or "budget" once it stopped the run
    listener: Callable[[GatePrecision], None] | None = None

    def measure(self, done: list[TrialRecord]) -> GatePrecision:
        tiers = gated_pairs(done, self.label_a, self.label_b, gate=self.gate)
        main = paired_precision(
            tiers["gate"], target=self.target, alpha=self.alpha, others=len(tiers["gate" + ABSOLUTE])
        )
        wide = None
        if tiers["wide"]:
            wide = paired_precision(
                tiers["wide"],
                target=self.gate.threshold("wide", self.target),
                alpha=self.alpha,
                others=len(tiers["wide" + ABSOLUTE]),
            )
        return GatePrecision(main, wide, self.min_pairs)

    def __call__(self, block: Sequence[object], done: list[TrialRecord]) -> str:
        self.state = self.measure(done)
        if self.listener is not None:
            self.listener(self.state)
        if self.state.reached:
            self.by = "target"
            return stop_text(self.state, "target")
        why = self.budget(block, done) if self.budget is not None else ""
        if why:
            self.by = "budget"
        return why


def status_text(p: GatePrecision) -> str:
    """The precision so far, for the progress line: 'MDE ±5.2% (target ±3%), wide tier ±7.0% (target ±6%)
    after 8 pairs'."""
    return f"MDE {_tier(p.main)}{_wide(p)} after {p.n_pairs} pair(s)"


def _tier(p: Precision) -> str:
    return f"{fmt_mde(p.mde)} (target {fmt_mde(p.target)})"


def _wide(p: GatePrecision) -> str:
    """The wide tier's part of a line (under the cost gate: throughput, the wire overhead and each side's
    figures, in a family of their own)."""
    return "" if p.wide is None else f", wide tier {_tier(p.wide)}"


def stop_text(p: GatePrecision, by: str) -> str:
    """Why the run ended: at the target, at the budget, or (by == "plan") after the planned repetitions."""
    if by == "target":
        return f"stopped at the target: {fmt_mde(p.main.mde)} after {p.n_pairs} pairs ({_worst(p.main)}){_wide(p)}"
    where = "at the budget" if by == "budget" else "after the planned repetitions (--repeat)"
    undefined = not math.isfinite(p.main.mde) or (p.wide is not None and not math.isfinite(p.wide.mde))
    targets = fmt_mde(p.main.target) + (f" and {fmt_mde(p.wide.target)}" if p.wide is not None else "")
    need = (
        f"{targets} need about {p.more_pairs} more pairs at this spread"
        if p.more_pairs
        else f"{targets} cannot be projected yet (too few pairs)"
        if undefined
        else ""
    )
    reached = f"{fmt_mde(p.main.mde)} reached after {p.n_pairs} pairs ({_worst(p.main)}){_wide(p)}"
    return f"stopped {where}: {reached}" + (f"; {need}" if need else "")


def _worst(p: Precision) -> str:
    if not p.worst:
        return "nothing to compare"
    return f"largest MDE: {p.worst}, Holm over {p.family} at alpha {p.level * p.family:.2g}"


def target_lines(result: CompareResult, runs: Sequence[RunRecord], target: float) -> list[str]:
    """What `compare --target 3%` adds under the verdict, per tier of the gate: the MDE reached (the largest of
    the tier's gated comparisons, at Holm's level, as the verdict line's range) and, when it is above the
    tier's target (the wide tier's: ``wide`` x the target), about how many more pairs (repetitions per side,
    unpaired) and how much more time at the run's own pace would reach it, assuming the spread stays as
    measured (as `calibrate` projects)."""
    main = [r for r in result.rows if r.gated and not r.wide and not r.result.absolute]
    wide = [r for r in result.rows if r.gated and r.wide and not r.result.absolute]
    if not main and not wide:
        return [f"target {fmt_mde(target)}: no relative gated comparison to measure it on"]
    lines = _tier_lines(main or wide, runs, target, "gated")
    if main and wide:
        lines += _tier_lines(wide, runs, result.gate.threshold("wide", target), "in the wide tier")
    return lines


def _tier_lines(gated: list[Any], runs: Sequence[RunRecord], target: float, what: str) -> list[str]:
    worst = max(gated, key=lambda r: (math.isnan(r.result.min_detectable_effect), r.result.min_detectable_effect))
    c = worst.result
    where = f"{worst.case_label} {worst.metric.title}"
    got = f"MDE reached: {fmt_mde(c.min_detectable_effect)} (the largest of {len(gated)} {what}: {where})"
    if math.isfinite(c.min_detectable_effect) and c.min_detectable_effect <= target:
        return [f"{got}; the target {fmt_mde(target)} is reached"]
    strict = 1.0 - c.alpha / max(1, c.family_size)
    if c.analysis == "paired":
        sds = [r.result.pair_sd for r in gated if math.isfinite(r.result.pair_sd)]
        if not sds:
            return [f"{got}; {fmt_mde(target)}: the spread is undefined, measure more pairs first"]
        need = max(required_pairs(max(sds), target, confidence=strict), MIN_STOP_PAIRS)  # what the run's stop holds
        have, unit = min(r.result.n_pairs for r in gated), "pairs"
    else:
        cvs = [max(r.result.baseline.cv, r.result.candidate.cv) for r in gated]
        cvs = [x for x in cvs if math.isfinite(x)]
        if not cvs:
            return [f"{got}; {fmt_mde(target)}: the spread is undefined, measure more repetitions first"]
        need = required_repetitions(max(cvs), target, confidence=strict)
        have, unit = min(min(r.result.baseline.n, r.result.candidate.n) for r in gated), "repetitions per side"
    more = max(0, need - have)
    pace = round_seconds(runs[-1]) if c.analysis == "paired" else None
    per = "repetition"
    if pace is not None and (windows := windows_per_bringup(runs[-1])) > 1:
        pace, per = pace * windows, "pair of warm bring-ups"  # the paired analysis' unit under --warm
    when = ""
    if pace is not None:
        when = (
            f"; at this run's pace ({pace:.1f} s per {per}) about {minutes(more * pace)} more, "
            f"{minutes(need * pace)} in all (`tunbench run ... --target-mde {fmt_mde(target).lstrip('±')} "
            f"--budget {math.ceil(need * pace / 60)}m`)"
        )
    return [
        f"{got}; for {fmt_mde(target)} about {need} {unit} in all, {more} more{when} (if the spread stays as measured)"
    ]


def windows_per_bringup(run: RunRecord) -> float:
    """The mean number of windows per warm bring-up of a run (1.0 for cold trials)."""
    bringups: dict[str, int] = {}
    for t in run.trials:
        warm = t.params.get("warm")
        if isinstance(warm, dict):
            key = str(warm.get("bringup"))
            bringups[key] = bringups.get(key, 0) + 1
    return sum(bringups.values()) / len(bringups) if bringups else 1.0


def round_seconds(run: RunRecord) -> float | None:
    """The wall time of one repetition round of a run, from its trials' start times (None below 2 rounds)."""
    starts: dict[int, float] = {}
    for t in run.trials:
        try:
            at = datetime.fromisoformat(t.started_at).timestamp()
        except ValueError:
            continue
        starts[t.repetition] = min(at, starts.get(t.repetition, at))
    if len(starts) < 2:
        return None
    first, last = min(starts.values()), max(starts.values())
    return (last - first) / (len(starts) - 1) if last > first else None
