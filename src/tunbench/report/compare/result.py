"""What `tunbench compare` found: one CaseComparison per case and metric, the CompareResult that holds them
(with its notes, its outcome per comparison and the exit status), and the error that exits 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from tunbench.errors import TunbenchError
from tunbench.report.compare.gate import Gate
from tunbench.report.compare.metrics import Metric
from tunbench.report.terminal import Flagged
from tunbench.results import CaseKey
from tunbench.stats import Comparison
from tunbench.workloads import case_title

EXIT_REGRESSED = 1
"""Exit status of `tunbench compare` when a gated case regressed beyond the threshold (errors exit 2)."""


Outcome: TypeAlias = Literal["regressed", "improved", "unchanged", "undecided"]
"""What a gated comparison says, for the verdict line. regressed / improved: significantly worse / better
(Holm-adjusted, beyond the threshold). unchanged: no significant change, and the comparison could have seen
one of the size that matters: its MDE is finite and, when a threshold is set, at most the threshold.
undecided: no significant change, but one that matters could have gone unseen (the MDE is infinite, e.g.
too few repetitions for the rank test to reach alpha at all, undefined, or above the threshold)."""


OUTCOMES: tuple[Outcome, ...] = ("regressed", "improved", "unchanged", "undecided")


@dataclass(frozen=True)
class CaseComparison:
    case_a: CaseKey
    case_b: CaseKey
    tunnel: str
    metric: Metric
    result: Comparison
    gated: bool
    wide: bool = False
    """A gated comparison in the gate's wide tier (``report.compare.gate``: its own Holm family and threshold)."""

    @property
    def verdict_text(self) -> str:
        """The metric's word for a verdict ("slower", "cheaper"), else "no significant change"; a real change
        smaller than the threshold says so ("costlier, within 6.0%"): it does not gate, but p < alpha is not
        "no change"."""
        c = self.result
        v = c.side if c.within_threshold else c.verdict
        word = self.metric.better if v == "better" else self.metric.worse if v == "worse" else v
        if not c.within_threshold:
            return word
        limit = f"{c.threshold:g} {c.unit}".rstrip() if c.absolute else f"{c.threshold:.1%}"
        return f"{word}, within {limit}"

    @property
    def case_label(self) -> str:
        text = case_title(self.case_a)
        if self.case_b.label != self.case_a.label:
            text = text.replace(self.case_a.label, f"{self.case_a.label} → {self.case_b.label}", 1)
        return text


@dataclass(frozen=True)
class CompareResult:
    """``threshold``: relative, for relative comparisons; ``threshold_abs``: per unit ("ms"), for absolute
    ones (0 for a unit not given). ``settings``: one line per network setting that differs between A and B
    (or one line saying they were not recorded)."""

    a_name: str
    b_name: str
    threshold: float
    rows: tuple[CaseComparison, ...]
    unmatched_a: tuple[CaseKey, ...] = ()
    unmatched_b: tuple[CaseKey, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    threshold_abs: dict[str, float] = field(default_factory=dict)
    settings: tuple[str, ...] = field(default_factory=tuple)
    analysis: str = "unpaired"
    """"paired" (every row), "unpaired" (every row) or "mixed"; ``analysis_reason`` says why, in one line."""
    analysis_reason: str = "A and B are different runs"
    dropped_pairs: int = 0
    gate: Gate = field(default_factory=Gate)
    instr_counter: str = ""  # what counted the instructions compared ("perf", "callgrind"; "": none counted)

    def family_sizes(self) -> tuple[int, int]:
        """The Holm family sizes of the gated rows: (main tier, at least 1; wide tier, 0 without one)."""
        main = max((r.result.family_size for r in self.rows if r.gated and not r.wide), default=1)
        return main, max((r.result.family_size for r in self.rows if r.wide), default=0)

    def gate_line(self) -> str:
        """What gated this comparison and why (``Gate.describe``), from the gated rows' metric titles."""
        main = list(dict.fromkeys(r.metric.title for r in self.rows if r.gated and not r.wide))
        wide = list(dict.fromkeys(r.metric.title for r in self.rows if r.gated and r.wide))
        return self.gate.describe(self.threshold, main, wide, counted_by=self.instr_counter or "callgrind")

    @property
    def regressions(self) -> list[CaseComparison]:
        return [r for r in self.rows if r.gated and r.result.regressed]

    @property
    def exit_code(self) -> int:
        return EXIT_REGRESSED if self.regressions else 0

    def warnings(self) -> list[Flagged]:
        """Each comparison's warnings, one per (cause, comparison), in row order, for ``grouped_lines``: every
        power/count warning, spread warnings of throughput only (CPU and latency spread is usually larger and
        would bury the rest; their verdicts account for it). The subject is the comparison; the detail, for a
        spread warning, the CV of A and B."""
        seen: dict[tuple[str, str], Flagged] = {}
        for r in self.rows:
            subject = f"{r.case_label} {r.metric.title}"
            for w in r.result.warnings:
                if w.code in _SPREAD_CODES and r.metric.kind != "throughput":
                    continue
                detail = ""
                if w.code == "high-cv":
                    detail = f"{_cv(r.result.baseline.cv)}/{_cv(r.result.candidate.cv)}"
                seen.setdefault((w.code, subject), Flagged(subject, w, detail))
        return list(seen.values())

    def outcome(self, row: CaseComparison) -> Outcome:
        """What one comparison says (see ``Outcome``)."""
        c = row.result
        if c.verdict == "worse":
            return "regressed"
        if c.verdict == "better":
            return "improved"
        mde = c.min_detectable_effect
        if math.isfinite(mde) and (c.threshold <= 0.0 or mde <= c.threshold):
            return "unchanged"
        return "undecided"

    def tally(self) -> dict[Outcome, int]:
        """How many gated comparisons (the direct baseline's are not) ended in each outcome."""
        out: dict[Outcome, int] = dict.fromkeys(OUTCOMES, 0)
        for r in self.rows:
            if r.gated:
                out[self.outcome(r)] += 1
        return out


def _cv(x: float) -> str:
    return f"{x:.0%}" if math.isfinite(x) else "–"


_SPREAD_CODES = ("high-cv", "outlier")


class CompareError(TunbenchError):
    """A or B cannot be loaded or matched; exit status 2 so that 1 always means "regressed"."""

    exit_code = 2
