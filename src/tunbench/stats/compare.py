"""A/B comparison of two cases (baseline vs candidate) with a verdict usable as a CI gate.

Definitions (all exact, so that reports and gates agree):

* Two modes. **Relative** (default for positive data: throughput, CPU per bit, latency): ``change`` is
  the Hodges-Lehmann estimate of the ratio candidate / baseline, on logs, minus 1 (-0.079 means -7.9 %):
  exp(median of the pairwise differences ln c_i - ln b_j) - 1, which under the scale model is
  median(candidate) / median(baseline) - 1. **Absolute** (signed data, e.g. the latency increase under
  load, which can be negative; and automatically whenever any value on either side is <= 0, so that a
  change is never taken relative to a median <= 0): ``change`` is the Hodges-Lehmann shift, the median of
  the pairwise differences c_i - b_j, in the metric's own unit (``unit``).
* ``[ci_low, ci_high]``: the distribution-free Hodges-Lehmann / Mann-Whitney interval that belongs to that
  estimate (the shift, or the ratio on log values minus 1); see ``tunbench.stats.shift``. One estimator
  gives the point and its interval, so the point always lies inside it (issue 28: a ratio of medians beside
  an HL interval once read -4.9 % [+848 %, +901 %] on a bimodal sample, and the verdict said "worse").
  ``ci_coverage`` is its real coverage: exact under the shift (or scale) model, and *below*
  ``confidence`` when the sizes allow nothing better (3 vs 3: 0.90; 4 vs 4: 0.971; 5 vs 5: 0.968).
  Reports print this coverage, never a nominal "95 %".
* ``p_value``: two-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``, method "auto": exact
  for small samples without ties, normal approximation otherwise). NaN if a side is empty.
  ``p_adjusted``: the p-value after the multiple-comparison adjustment of ``adjust`` (Holm across the
  family of comparisons that gate; ``family_size`` of them); equal to ``p_value`` until adjusted.
* ``alpha`` = 1 - ``confidence``.
* ``threshold``: the smallest change that counts, as a fraction (0.03 = 3 %) in relative mode and in
  the metric's unit in absolute mode (a relative threshold cannot apply to a difference of signed
  values; callers pass the unit threshold, ``tunbench compare --threshold-ms``, or 0).
* **significant** iff ALL of:
  1. the change CI excludes 0 (``ci_low > 0`` or ``ci_high < 0``);
  2. ``p_adjusted < alpha``;
  3. ``abs(change) >= threshold``;
  4. the sample sizes allow significance at all: the smallest p-value the exact test can produce,
     2 / C(n_b + n_c, n_b), is < alpha. At alpha = 0.05 this needs at least 4 repetitions per side
     (3 vs 3 -> 0.1, 3 vs 4 -> 0.057, 4 vs 4 -> 0.029). Rule 4 matters because with heavily tied
     data scipy's normal approximation can report p < 0.05 for 3 vs 3, an artefact. When rule 4
     fails a ``cannot-reach-significance`` warning says how many repetitions are needed.
* ``verdict``: "better"/"worse" if significant, in the direction of the interval (the side of 0 it lies
  on; the point lies inside it) read with ``higher_is_better`` (throughput: higher is better; latency, CPU
  seconds per bit: lower is better); otherwise "no significant change".
* ``regressed`` iff verdict == "worse", i.e. significantly worse *and* the point estimate of the
  change is at least ``threshold``. (A CI gate that also wants the CI to lie beyond the threshold can
  check ``ci_high <= -threshold`` / ``ci_low >= threshold`` itself.)
* ``min_repetitions``: the one rule for the fewest repetitions with which a family of gated comparisons
  can give any verdict (rule 4 at Holm's first level); compare, `run --dry-run`, the run's header and the
  docs follow it.
* ``min_detectable_effect`` (MDE): the change detectable with ~80 % power at these n and the observed
  noise, by the two-sample normal-theory formula with t quantiles (df = n_b + n_c - 2, slightly more
  honest than z at small n); relative mode uses the CVs, absolute mode the standard deviations (the MDE
  is then in the metric's unit)::

      MDE = (t_{1 - alpha/2} + t_{power}) * sqrt(s_b^2 / n_b + s_c^2 / n_c)

  which for equal n and spread is (t + t) * sqrt(2) * s / sqrt(n). After ``adjust`` it is computed at
  the strictest Holm level, alpha / family_size (the level the first rejection needs). It is
  approximate (the rank test has ~95 % of the t-test's efficiency on normal data) and is ``inf`` when
  rule 4 makes significance impossible, NaN when a spread is undefined (n < 2, or mean 0 for a CV).

Paired analysis (``compare_paired``, ``analysis == "paired"``): when baseline[k] and candidate[k] were
measured as a pair (same case and repetition of one run, seconds apart), the comparison is made on the
within-pair differences d_k = ln(c_k / b_k) (relative) or c_k - b_k (absolute) with the paired t
(``tunbench.stats.paired.paired_t``): ``change`` = exp(mean(d)) - 1 (relative) or mean(d) (absolute);
``[ci_low, ci_high]`` the Student-t interval of the mean (nominal coverage, exact for normal d); ``p_value``
the one-sample t-test on d. Why the t and not the signed-rank test: the rank test's p-value cannot go below
2 / 2**n, so 6 pairs under Holm over 6 comparisons could not call even a 5.6x speed-up (issue 28); the t
statistic grows with the change's size relative to the spread, and keeps its level under the symmetric
null of an A/A (docs/precision.md: simulated level and power at 3-10 pairs). Rule 4 then holds from 2
pairs on; compare pairs from ``MIN_PAIRS`` (3). The MDE is (t + t) * s_d / sqrt(n_pairs) at df =
n_pairs - 1, s_d the SD of d (``pair_sd``). Everything else (threshold, verdict, Holm in ``adjust``) is the
same as for the unpaired analysis.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

import numpy as np
from scipy import stats as sps

from tunbench.stats._common import FloatArray, Values, as_array, check_confidence, first_n
from tunbench.stats.checks import StabilityWarning, pct, stability_warnings
from tunbench.stats.multiple import holm
from tunbench.stats.paired import (
    MIN_PAIRS,
    min_detectable_effect_paired,
    paired_t,
    required_pairs,
)
from tunbench.stats.shift import shift_interval
from tunbench.stats.summary import DEFAULT_RESAMPLES, Summary, ratio_of_medians, summarize

Verdict: TypeAlias = Literal["better", "worse", "no significant change"]
Analysis: TypeAlias = Literal["unpaired", "paired"]

DEFAULT_POWER = 0.8
_MAX_REPETITIONS = 100_000


@dataclass(frozen=True)
class Comparison:
    """Result of ``compare``; see the module docstring for exact definitions.

    ``absolute``: change, CI, threshold and MDE are differences in ``unit`` (else fractions).
    ``analysis``: "unpaired" (Mann-Whitney, two samples) or "paired" (paired t on ``n_pairs`` within-pair
    differences whose SD is ``pair_sd``: log ratios in relative mode, differences in ``unit`` in absolute mode).
    """

    baseline: Summary
    candidate: Summary
    change: float
    ci_low: float
    ci_high: float
    p_value: float
    confidence: float
    threshold: float
    higher_is_better: bool
    verdict: Verdict
    regressed: bool
    min_detectable_effect: float
    warnings: tuple[StabilityWarning, ...]
    ci_coverage: float = float("nan")
    absolute: bool = False
    unit: str = ""
    p_adjusted: float = float("nan")
    family_size: int = 1
    analysis: Analysis = "unpaired"
    n_pairs: int = 0
    pair_sd: float = float("nan")

    @property
    def significant(self) -> bool:
        return self.verdict != "no significant change"

    @property
    def within_threshold(self) -> bool:
        """Not a verdict, but a real change smaller than the threshold: rules 1, 2 and 4 hold (with Holm's p
        where adjusted), so only rule 3, ``abs(change) >= threshold``, kept it from being one."""
        p = self.p_value if math.isnan(self.p_adjusted) else self.p_adjusted
        return not self.significant and _evident(self.ci_low, self.ci_high, p, self.alpha, self.p_floor)

    @property
    def side(self) -> Literal["better", "worse"]:
        """Which way the interval points, by the side of 0 its low end lies on (a verdict's direction)."""
        return _side(self.ci_low, self.higher_is_better)

    @property
    def p_floor(self) -> float:
        """The smallest p-value this comparison's exact test can give (rule 4)."""
        if self.analysis == "paired":
            return paired_p_floor(self.n_pairs)
        return min_attainable_p(self.baseline.n, self.candidate.n)

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence


def min_attainable_p(n_baseline: int, n_candidate: int) -> float:
    """Smallest two-sided exact Mann-Whitney p-value for these sizes (no ties): 2 / C(n1+n2, n1)."""
    if n_baseline < 1 or n_candidate < 1:
        return 1.0
    # in logs: C(n1+n2, n1) overflows a float past a few hundred samples per side
    log_comb = math.lgamma(n_baseline + n_candidate + 1) - math.lgamma(n_baseline + 1) - math.lgamma(n_candidate + 1)
    return min(1.0, math.exp(math.log(2.0) - log_comb))


def paired_p_floor(n_pairs: int) -> float:
    """The smallest p-value the paired t-test can give with ``n_pairs`` pairs: 0 from 2 pairs on, else 1."""
    return 0.0 if n_pairs >= 2 else 1.0


def min_repetitions(family: int = 1, *, paired: bool, alpha: float = 0.05) -> int:
    """THE minimum-repetition rule (issue 34): the fewest repetitions with which a family of ``family`` gated
    comparisons, Holm-adjusted at ``alpha``, can give any verdict at all. Compare's notes and power warnings,
    `run --dry-run` and the run's header, compare's help and the docs (a unit test checks them) all follow it.

    * paired (two labels of one run, by repetition): the paired t-test has no floor, so it is the fewest pairs
      compare pairs at all, ``MIN_PAIRS`` (3); below that a case is compared unpaired.
    * unpaired (two runs): the exact Mann-Whitney test's smallest p-value 2 / C(2n, n) must be below Holm's
      first level alpha / family: 4 per side for one comparison, 5 for 2-6, 6 for 7-23, 7 for 24-85, ...

    This is the floor for any verdict, not a recommendation: how many repetitions a change of a given size
    needs is the MDE's business (``calibrate``, ``compare --target``)."""
    if family < 1:
        raise ValueError(f"family must be >= 1, got {family}")
    level = alpha / family
    if paired:
        return next(n for n in range(MIN_PAIRS, 1000) if paired_p_floor(n) < level)
    return next(n for n in range(2, 1000) if min_attainable_p(n, n) < level)


def min_detectable_effect(
    cv_baseline: float,
    n_baseline: int,
    cv_candidate: float,
    n_candidate: int,
    *,
    confidence: float = 0.95,
    power: float = DEFAULT_POWER,
) -> float:
    """Approximate smallest detectable change (see module docstring).

    Pass CVs for a relative MDE, or standard deviations for an MDE in the data's unit (same formula).
    """
    check_confidence(confidence)
    alpha = 1.0 - confidence
    if n_baseline < 2 or n_candidate < 2 or math.isnan(cv_baseline) or math.isnan(cv_candidate):
        return float("nan")
    if min_attainable_p(n_baseline, n_candidate) >= alpha:
        return math.inf
    df = n_baseline + n_candidate - 2
    t_sum = float(sps.t.ppf(1.0 - alpha / 2.0, df) + sps.t.ppf(power, df))
    return t_sum * math.sqrt(cv_baseline**2 / n_baseline + cv_candidate**2 / n_candidate)


def required_repetitions(cv: float, effect: float, *, confidence: float = 0.95, power: float = DEFAULT_POWER) -> int:
    """Smallest repetitions per side so that a relative ``effect`` is detectable at noise ``cv``.

    Uses ``min_detectable_effect`` with equal n and CV on both sides; at least the n for which
    the exact rank test can reach alpha. Capped at 100 000.
    """
    if effect <= 0.0 or math.isnan(cv):
        raise ValueError(f"need effect > 0 and a defined cv, got effect={effect}, cv={cv}")

    def detects(n: int) -> bool:
        return min_detectable_effect(cv, n, cv, n, confidence=confidence, power=power) <= effect

    return first_n(detects, _MAX_REPETITIONS)  # the MDE shrinks as n grows


def compare(
    baseline: Values,
    candidate: Values,
    *,
    higher_is_better: bool,
    threshold: float = 0.0,
    confidence: float = 0.95,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    label: str = "",
    absolute: bool | None = None,
    unit: str = "",
) -> Comparison:
    """Compare candidate to baseline (see the module docstring).

    ``absolute``: True compares differences in ``unit``; None (default) does so only when some value
    on either side is <= 0, else compares relative changes. ``threshold`` is a fraction (0.03 = 3 %)
    in relative mode and a difference in ``unit`` in absolute mode.
    """
    check_confidence(confidence)
    if threshold < 0.0 or math.isnan(threshold):
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    b = as_array(baseline, name="baseline")
    c = as_array(candidate, name="candidate")
    if absolute is None:
        absolute = bool(np.any(b <= 0.0) or np.any(c <= 0.0))
    alpha = 1.0 - confidence
    sb = summarize(b, confidence=confidence, resamples=resamples, seed=seed)
    sc = summarize(c, confidence=confidence, resamples=resamples, seed=seed)
    if absolute:
        ci = shift_interval(b, c, confidence)
        change, lo, hi, coverage = ci.estimate, ci.low, ci.high, ci.coverage
        mde = min_detectable_effect(sb.stdev, sb.n, sc.stdev, sc.n, confidence=confidence)
    else:
        ratio = ratio_of_medians(c, b, confidence=confidence, resamples=resamples, seed=seed)
        change, lo, hi, coverage = ratio.value - 1.0, ratio.ci_low - 1.0, ratio.ci_high - 1.0, ratio.ci_coverage
        mde = min_detectable_effect(sb.cv, sb.n, sc.cv, sc.n, confidence=confidence)
    p = _mann_whitney_p(b, c)
    verdict = _verdict(change, lo, hi, p, threshold, alpha, min_attainable_p(sb.n, sc.n), higher_is_better)
    design = _unpaired(sb, sc, absolute=absolute)
    power = _power_warnings(design, alpha, threshold, mde, label, absolute=absolute, unit=unit)
    return _result(
        b, c, sb, sc, (change, lo, hi, coverage), p, mde, verdict, power,
        confidence=confidence, threshold=threshold, higher_is_better=higher_is_better, label=label,
        absolute=absolute, unit=unit,
    )  # fmt: skip


def _result(
    b: FloatArray,
    c: FloatArray,
    sb: Summary,
    sc: Summary,
    estimate: tuple[float, float, float, float],
    p: float,
    mde: float,
    verdict: Verdict,
    power: Sequence[StabilityWarning],
    *,
    confidence: float,
    threshold: float,
    higher_is_better: bool,
    label: str,
    absolute: bool,
    unit: str,
    **paired: Any,
) -> Comparison:
    """The Comparison both analyses return: (change, CI low, CI high, its coverage), the test's p, the MDE,
    the verdict, each side's stability warnings and the power warnings; `paired` adds the paired fields."""
    change, lo, hi, coverage = estimate
    prefix = f"{label} " if label else ""
    warnings = (
        *stability_warnings(b, label=f"{prefix}baseline"),
        *stability_warnings(c, label=f"{prefix}candidate"),
        *power,
    )
    return Comparison(
        baseline=sb,
        candidate=sc,
        change=change,
        ci_low=lo,
        ci_high=hi,
        p_value=p,
        confidence=confidence,
        threshold=threshold,
        higher_is_better=higher_is_better,
        verdict=verdict,
        regressed=verdict == "worse",
        min_detectable_effect=mde,
        warnings=warnings,
        ci_coverage=coverage,
        absolute=absolute,
        unit=unit,
        p_adjusted=p,
        family_size=1,
        **paired,
    )


def compare_paired(
    baseline: Values,
    candidate: Values,
    *,
    higher_is_better: bool,
    threshold: float = 0.0,
    confidence: float = 0.95,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    label: str = "",
    absolute: bool | None = None,
    unit: str = "",
) -> Comparison:
    """Compare candidate to baseline pair by pair: ``baseline[k]`` and ``candidate[k]`` are partners.

    The paired analysis of the module docstring; arguments as for ``compare``. Needs equal lengths.
    """
    check_confidence(confidence)
    if threshold < 0.0 or math.isnan(threshold):
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    b = as_array(baseline, name="baseline")
    c = as_array(candidate, name="candidate")
    if b.size != c.size:
        raise ValueError(f"paired comparison needs as many baseline as candidate values, got {b.size} and {c.size}")
    if absolute is None:
        absolute = bool(np.any(b <= 0.0) or np.any(c <= 0.0))
    alpha = 1.0 - confidence
    n = int(b.size)
    sb = summarize(b, confidence=confidence, resamples=resamples, seed=seed)
    sc = summarize(c, confidence=confidence, resamples=resamples, seed=seed)
    d = c - b if absolute else np.log(c) - np.log(b)
    mean, ci, p = paired_t(d, confidence)
    if absolute:
        change, lo, hi = mean, ci.low, ci.high
    else:
        change, lo, hi = math.expm1(mean), math.expm1(ci.low), math.expm1(ci.high)
    sd = float(np.std(d, ddof=1)) if n >= 2 else float("nan")
    mde = min_detectable_effect_paired(sd, n, confidence=confidence)
    verdict = _verdict(change, lo, hi, p, threshold, alpha, paired_p_floor(n), higher_is_better)
    power = _power_warnings(_paired(n, sd), alpha, threshold, mde, label, absolute=absolute, unit=unit)
    return _result(
        b, c, sb, sc, (change, lo, hi, ci.coverage), p, mde, verdict, power,
        confidence=confidence, threshold=threshold, higher_is_better=higher_is_better, label=label,
        absolute=absolute, unit=unit, analysis="paired", n_pairs=n, pair_sd=sd,
    )  # fmt: skip


def adjust(comparisons: Sequence[Comparison], *, label: str = "") -> list[Comparison]:
    """The comparisons of one family (e.g. every comparison that can fail a gate), Holm-adjusted.

    Each result gets ``p_adjusted`` (Holm, see ``tunbench.stats.multiple``), ``family_size`` (the
    comparisons with a p-value), a verdict recomputed with ``p_adjusted`` and an MDE (and
    ``underpowered`` warning) at the strictest Holm level alpha / family_size. The family-wise
    probability of any false "better" or "worse" is then <= alpha.
    """
    if not comparisons:
        return []
    adjusted = holm([c.p_value for c in comparisons])
    m = max(1, int(np.count_nonzero(np.isfinite(adjusted))))
    out = []
    for c, p_adj in zip(comparisons, adjusted, strict=True):
        sb, sc = c.baseline, c.candidate
        alpha = c.alpha
        verdict = _verdict(
            c.change, c.ci_low, c.ci_high, float(p_adj), c.threshold, alpha, c.p_floor, c.higher_is_better
        )
        strict = 1.0 - alpha / m
        kept = [w for w in c.warnings if w.code != "underpowered"]
        if c.analysis == "paired":
            design = _paired(c.n_pairs, c.pair_sd)
            mde = min_detectable_effect_paired(c.pair_sd, c.n_pairs, confidence=strict)
        else:
            design = _unpaired(sb, sc, absolute=c.absolute)
            spread = (sb.stdev, sc.stdev) if c.absolute else (sb.cv, sc.cv)
            mde = min_detectable_effect(spread[0], sb.n, spread[1], sc.n, confidence=strict)
        power = _power_warnings(
            design, alpha / m, c.threshold, mde, label, absolute=c.absolute, unit=c.unit, reach=False
        )
        out.append(
            replace(
                c,
                p_adjusted=float(p_adj),
                family_size=m,
                verdict=verdict,
                regressed=verdict == "worse",
                min_detectable_effect=mde,
                warnings=tuple(kept + power),
            )
        )
    return out


def _verdict(
    change: float,
    lo: float,
    hi: float,
    p: float,
    threshold: float,
    alpha: float,
    p_floor: float,
    higher_is_better: bool,
) -> Verdict:
    """The verdict; its direction is the interval's (the side of 0 it lies on), never the point's alone."""
    if not (_evident(lo, hi, p, alpha, p_floor) and abs(change) >= threshold):
        return "no significant change"
    return _side(lo, higher_is_better)


def _side(lo: float, higher_is_better: bool) -> Literal["better", "worse"]:
    return "better" if (lo > 0.0) == higher_is_better else "worse"


def _evident(lo: float, hi: float, p: float, alpha: float, p_floor: float) -> bool:
    """Rules 1, 2 and 4: the interval excludes 0, p is below alpha, and the test can reach alpha at all."""
    return (lo > 0.0 or hi < 0.0) and p < alpha and p_floor < alpha


def _mann_whitney_p(b: FloatArray, c: FloatArray) -> float:
    if b.size == 0 or c.size == 0:
        return float("nan")
    if np.all(b == b[0]) and np.all(c == b[0]):
        return 1.0  # every value tied: no evidence of a difference (scipy would give NaN)
    return float(sps.mannwhitneyu(b, c, alternative="two-sided").pvalue)


def _amount(x: float, *, absolute: bool, unit: str) -> str:
    return f"{x:.3g} {unit}".rstrip() if absolute else pct(x)


@dataclass(frozen=True)
class _Design:
    """One analysis as its power warnings speak of it: ``sizes``, each side's repetitions (a paired analysis:
    its pairs, twice); ``spread``, what its MDE rests on (unpaired: the two sides' root-mean-square CV, or sd
    when absolute; paired: the within-pair sd of the log ratios, or of the differences when absolute).
    ``_unpaired`` and ``_paired`` build one; ``_power_warnings`` writes the warnings of both."""

    paired: bool
    sizes: tuple[int, int]
    spread: float

    @property
    def sample(self) -> str:
        """The sample in words: "8 vs 8 repetitions", "8 pairs"."""
        return f"{self.sizes[0]} pairs" if self.paired else f"{self.sizes[0]} vs {self.sizes[1]} repetitions"

    def noise(self, *, absolute: bool, unit: str) -> str:
        """The spread in words: "CV 4.1%", "sd 0.3 ms", "within-pair sd 2.0% (log ratio)"."""
        if self.paired:
            if absolute:
                return f"within-pair sd {self.spread:.3g} {unit}".rstrip()
            return f"within-pair sd {pct(self.spread)} (log ratio)"
        return f"sd {self.spread:.3g} {unit}".rstrip() if absolute else f"CV {pct(self.spread)}"

    def unreachable(self, alpha: float) -> tuple[str, str] | None:
        """(what, what to do) when the test cannot reach ``alpha`` at these sizes at all, else None."""
        if self.paired:
            n = self.sizes[0]
            if paired_p_floor(n) < alpha:
                return None
            need = min_repetitions(paired=True)
            return (
                f"with {n} pair(s) the paired t-test cannot reach {alpha:.3g}: no change can be called significant",
                f"use --repeat {need} or more (at least {need} pairs)",
            )
        min_p = min_attainable_p(*self.sizes)
        if min_p < alpha:
            return None
        need = min_repetitions(paired=False, alpha=alpha)
        return (
            f"with {self.sizes[0]} vs {self.sizes[1]} repetitions the rank test's smallest possible p-value is "
            f"{min_p:.3g} >= {alpha:.3g}: no change can be called significant",
            f"use --repeat {need} or more (at least {need} per side)",
        )

    def required(self, threshold: float, alpha: float) -> int:
        """The repetitions (pairs) that would detect ``threshold`` at level ``alpha`` with this spread."""
        if self.paired:
            return required_pairs(self.spread, threshold, confidence=1.0 - alpha)
        return required_repetitions(self.spread, threshold, confidence=1.0 - alpha)


def _unpaired(sb: Summary, sc: Summary, *, absolute: bool) -> _Design:
    spread = math.sqrt((sb.stdev**2 + sc.stdev**2) / 2.0) if absolute else math.sqrt((sb.cv**2 + sc.cv**2) / 2.0)
    return _Design(False, (sb.n, sc.n), spread)


def _paired(n: int, sd: float) -> _Design:
    return _Design(True, (n, n), sd)


def _power_warnings(
    design: _Design,
    alpha: float,
    threshold: float,
    mde: float,
    label: str,
    *,
    absolute: bool,
    unit: str,
    reach: bool = True,
) -> list[StabilityWarning]:
    """The power warnings of one comparison, paired or not: ``cannot-reach-significance`` when its test cannot
    reach ``alpha`` at these sizes (``reach``: checked; ``adjust`` keeps the one it had), else ``underpowered``
    when the changes it reliably detects (``mde``) are larger than ``threshold``; none for an empty side."""
    prefix = f"{label}: " if label else ""
    if min(design.sizes) == 0:
        return []
    if reach and (unreachable := design.unreachable(alpha)) is not None:
        what, todo = unreachable
        return [StabilityWarning("cannot-reach-significance", prefix + what, todo)]
    if not (threshold > 0.0 and math.isfinite(mde) and mde > threshold):
        return []
    need = design.required(threshold, alpha)
    return [
        StabilityWarning(
            "underpowered",
            f"{prefix}at {design.noise(absolute=absolute, unit=unit)} and {design.sample} only changes of about "
            f"{_amount(mde, absolute=absolute, unit=unit)} or more are reliably detected, above the "
            f"{_amount(threshold, absolute=absolute, unit=unit)} threshold",
            f"use --repeat {need} (or reduce noise: pin CPUs, quiet the host)",
        )
    ]
