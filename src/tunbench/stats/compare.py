"""A/B comparison of two cases (baseline vs candidate) with a verdict usable as a CI gate.

Definitions (all exact, so that reports and gates agree):

* ``change`` = median(candidate) / median(baseline) - 1 (relative; -0.079 means -7.9 %), with a
  percentile-bootstrap CI ``[ci_low, ci_high]`` at ``confidence`` (see ``ratio_of_medians``).
* ``p_value``: two-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``, method "auto": exact
  for small samples without ties, normal approximation otherwise). NaN if a side is empty.
* ``alpha`` = 1 - ``confidence``.
* **significant** iff ALL of:
  1. the change CI excludes 0 (``ci_low > 0`` or ``ci_high < 0``);
  2. ``p_value < alpha``;
  3. ``abs(change) >= threshold``;
  4. the sample sizes allow significance at all: the smallest p-value the exact test can produce,
     2 / C(n_b + n_c, n_b), is < alpha. At alpha = 0.05 this needs at least 4 repetitions per side
     (3 vs 3 -> 0.1, 3 vs 4 -> 0.057, 4 vs 4 -> 0.029). Rule 4 matters because with heavily tied
     data scipy's normal approximation can report p < 0.05 for 3 vs 3, an artefact. When rule 4
     fails a ``cannot-reach-significance`` warning says how many repetitions are needed.
* ``verdict``: "better"/"worse" if significant, in the direction given by ``higher_is_better``
  (throughput: higher is better; latency, CPU seconds per bit: lower is better); otherwise
  "no significant change".
* ``regressed`` iff verdict == "worse", i.e. significantly worse *and* the point estimate of the
  change is at least ``threshold`` in the bad direction. (A CI gate that also wants the CI to lie
  beyond the threshold can check ``ci_high <= -threshold`` / ``ci_low >= threshold`` itself.)
* ``min_detectable_effect`` (MDE): the relative change detectable with ~80 % power at these n and
  the observed noise, by the two-sample normal-theory formula with t quantiles
  (df = n_b + n_c - 2, slightly more honest than z at small n)::

      MDE = (t_{1 - alpha/2} + t_{power}) * sqrt(cv_b^2 / n_b + cv_c^2 / n_c)

  which for equal n and CV is (t + t) * sqrt(2) * cv / sqrt(n). It is approximate (the rank test
  has ~95 % of the t-test's efficiency on normal data) and is ``inf`` when rule 4 makes
  significance impossible, NaN when a CV is undefined (n < 2 or mean 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, TypeAlias

import numpy as np
from scipy import stats as sps

from tunbench.stats._common import FloatArray, Values, as_array, check_confidence
from tunbench.stats.checks import StabilityWarning, pct, stability_warnings
from tunbench.stats.summary import DEFAULT_RESAMPLES, Summary, ratio_of_medians, summarize

Verdict: TypeAlias = Literal["better", "worse", "no significant change"]

DEFAULT_POWER = 0.8
_MAX_REPETITIONS = 100_000


@dataclass(frozen=True)
class Comparison:
    """Result of ``compare``; see the module docstring for exact definitions."""

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

    @property
    def significant(self) -> bool:
        return self.verdict != "no significant change"


def min_attainable_p(n_baseline: int, n_candidate: int) -> float:
    """Smallest two-sided exact Mann-Whitney p-value for these sizes (no ties): 2 / C(n1+n2, n1)."""
    if n_baseline < 1 or n_candidate < 1:
        return 1.0
    # in logs: C(n1+n2, n1) overflows a float past a few hundred samples per side
    log_comb = math.lgamma(n_baseline + n_candidate + 1) - math.lgamma(n_baseline + 1) - math.lgamma(n_candidate + 1)
    return min(1.0, math.exp(math.log(2.0) - log_comb))


def min_detectable_effect(
    cv_baseline: float,
    n_baseline: int,
    cv_candidate: float,
    n_candidate: int,
    *,
    confidence: float = 0.95,
    power: float = DEFAULT_POWER,
) -> float:
    """Approximate smallest detectable relative change (see module docstring)."""
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

    # the MDE shrinks as n grows, so bisect for the first n that detects the effect
    lo, hi = 2, _MAX_REPETITIONS
    if not detects(hi):
        return _MAX_REPETITIONS
    while lo < hi:
        mid = (lo + hi) // 2
        if detects(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


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
) -> Comparison:
    """Compare candidate to baseline; ``threshold`` is a relative change (0.03 = 3 %)."""
    check_confidence(confidence)
    if threshold < 0.0 or math.isnan(threshold):
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    b = as_array(baseline, name="baseline")
    c = as_array(candidate, name="candidate")
    alpha = 1.0 - confidence
    sb = summarize(b, confidence=confidence, resamples=resamples, seed=seed)
    sc = summarize(c, confidence=confidence, resamples=resamples, seed=seed)
    ratio = ratio_of_medians(c, b, confidence=confidence, resamples=resamples, seed=seed)
    change, lo, hi = ratio.value - 1.0, ratio.ci_low - 1.0, ratio.ci_high - 1.0
    p = _mann_whitney_p(b, c)
    reachable = min_attainable_p(b.size, c.size) < alpha
    significant = (lo > 0.0 or hi < 0.0) and p < alpha and abs(change) >= threshold and reachable
    improvement = change if higher_is_better else -change
    verdict: Verdict = "no significant change"
    if significant:
        verdict = "better" if improvement > 0.0 else "worse"
    mde = min_detectable_effect(sb.cv, sb.n, sc.cv, sc.n, confidence=confidence)
    prefix = f"{label} " if label else ""
    warnings = [
        *stability_warnings(b, label=f"{prefix}baseline"),
        *stability_warnings(c, label=f"{prefix}candidate"),
        *_power_warnings(sb, sc, alpha, threshold, mde, label),
    ]
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
        warnings=tuple(warnings),
    )


def _mann_whitney_p(b: FloatArray, c: FloatArray) -> float:
    if b.size == 0 or c.size == 0:
        return float("nan")
    if np.all(b == b[0]) and np.all(c == b[0]):
        return 1.0  # every value tied: no evidence of a difference (scipy would give NaN)
    return float(sps.mannwhitneyu(b, c, alternative="two-sided").pvalue)


def _power_warnings(
    sb: Summary, sc: Summary, alpha: float, threshold: float, mde: float, label: str
) -> list[StabilityWarning]:
    prefix = f"{label}: " if label else ""
    if sb.n == 0 or sc.n == 0:
        return []
    min_p = min_attainable_p(sb.n, sc.n)
    if min_p >= alpha:
        need = next(n for n in range(1, 100) if min_attainable_p(n, n) < alpha)
        return [
            StabilityWarning(
                "cannot-reach-significance",
                f"{prefix}with {sb.n} vs {sc.n} repetitions the rank test's smallest possible p-value is "
                f"{min_p:.3g} >= {alpha:.3g}: no change can be called significant",
                f"use --repeat {max(need, 5)} or more (at least {need} per side)",
            )
        ]
    if threshold > 0.0 and math.isfinite(mde) and mde > threshold:
        cv = math.sqrt((sb.cv**2 + sc.cv**2) / 2.0)
        n = required_repetitions(cv, threshold, confidence=1.0 - alpha)
        return [
            StabilityWarning(
                "underpowered",
                f"{prefix}at CV {pct(cv)} and {sb.n} vs {sc.n} repetitions only changes of about "
                f"{pct(mde)} or more are reliably detected, above the {pct(threshold)} threshold",
                f"use --repeat {n} (or reduce noise: pin CPUs, quiet the host)",
            )
        ]
    return []
