"""Paired analysis of A/B pairs: the paired t (``paired_t``: mean, t interval and t-test of the within-pair
changes, which is compare's paired verdict), the distribution-free alternatives (Hodges-Lehmann estimate,
its Walsh-average CI with its real coverage, the Wilcoxon signed-rank p-value: kept for reference and tests),
and the paired MDE.

When A and B were measured as pairs (two labels of one run, same case, same repetition: the partners ran
seconds apart), most of the run-to-run drift of the host is shared by both partners and cancels in the
within-pair difference ``d_k = b_k - a_k`` (or ``d_k = ln(b_k / a_k)`` for ratio metrics). The unpaired
analysis (``tunbench.stats.shift``) cannot remove it: its interval is as wide as the drift.

* estimate: the Hodges-Lehmann estimate of the centre of ``d``, the median of the ``N = n (n + 1) / 2``
  Walsh averages ``(d_i + d_j) / 2``, i <= j;
* interval: ``[W_(k), W_(N - k + 1)]`` of the sorted Walsh averages covers the centre with probability
  ``1 - 2 * P(T+ <= k - 1)``, T+ the Wilcoxon signed-rank statistic under the null hypothesis. That is
  *exact* for continuous ``d`` symmetric about its centre (Hollander & Wolfe ch. 3.3; R's
  ``wilcox.test(d, conf.int = TRUE)``), so the coverage reported is the real one. ``k`` is the largest
  index whose coverage is still >= the requested confidence; when even ``[W_(1), W_(N)]`` falls short
  (n = 4: 1 - 2/16 = 0.875) that widest interval is returned with its true coverage, as
  ``shift.shift_interval`` does. 5 pairs: 0.9375; 6: 0.969; 8: 0.961; 10: 0.951; 15: 0.952.
  From ``EXACT_MAX_N`` pairs the normal approximation of T+ is used and the coverage is the nominal one.
* p-value: ``scipy.stats.wilcoxon`` (two-sided; exact up to 50 pairs without ties or zero differences,
  a permutation or normal approximation otherwise). The interval is the inversion of the exact test, so
  the two agree when the data have no ties.
* smallest attainable p-value with n pairs: ``2 / 2**n`` (5 pairs: 0.0625, 6 pairs: 0.031): at alpha =
  0.05 a paired comparison needs at least 6 pairs.
* MDE: the paired normal-theory formula with t quantiles at df = n - 1, from the SD of ``d``::

      MDE = (t_{1 - alpha/2} + t_{power}) * s_d / sqrt(n)

  (the paired analogue of ``compare.min_detectable_effect``; for ratio metrics in log units, which for
  small changes is the fraction).

The null distribution of T+ is hand-computed (exact integers) because scipy keeps it private; the tests
check it against ``scipy.stats.wilcoxon(method="exact")``.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import stats as sps

from tunbench.stats._common import FloatArray, check_confidence, first_n, null_cdf, order_statistic_k
from tunbench.stats.shift import ShiftInterval

EXACT_MAX_N = 50
"""Exact null distribution of T+ below this many pairs; normal approximation from there."""

MIN_PAIRS = 3
"""Fewer pairs than this: the paired analysis is not attempted (callers fall back to unpaired)."""

_NAN = float("nan")
_MAX_PAIRS = 100_000


@functools.lru_cache(maxsize=256)
def signed_rank_null_cdf(n: int) -> tuple[float, ...]:
    """P(T+ <= t) for t = 0 .. n(n+1)/2, T+ the signed-rank statistic of n pairs, no ties or zeros.

    The number of sign patterns with T+ = t is the coefficient of q**t in prod_{i=1..n} (1 + q**i).
    """
    if n < 1:
        raise ValueError(f"need n >= 1, got {n}")
    size = n * (n + 1) // 2 + 1
    counts = [0] * size
    counts[0] = 1
    top = 0
    for i in range(1, n + 1):
        top += i
        for t in range(top, i - 1, -1):
            counts[t] += counts[t - i]
    return null_cdf(counts, 2**n)


@functools.lru_cache(maxsize=256)
def _critical(n: int, confidence: float) -> tuple[int, float, bool]:
    """1-based k of the interval [W_(k), W_(N-k+1)] and its coverage (see the module docstring)."""
    cdf = signed_rank_null_cdf(n) if n < EXACT_MAX_N else None
    return order_statistic_k(cdf, n * (n + 1) // 2, math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0), confidence)


def walsh_averages(d: FloatArray) -> FloatArray:
    """The n (n + 1) / 2 averages (d_i + d_j) / 2, i <= j, sorted."""
    i, j = np.triu_indices(d.size)
    return np.sort((d[i] + d[j]) / 2.0)


def hodges_lehmann(d: FloatArray) -> float:
    """Median of the Walsh averages: the estimate of the centre of d. NaN if d is empty."""
    if d.size == 0:
        return _NAN
    return float(np.median(walsh_averages(d)))


def paired_interval(d: FloatArray, confidence: float) -> ShiftInterval:
    """Distribution-free CI of the centre of the within-pair differences ``d`` (module docstring).

    NaN when there are fewer than 2 pairs.
    """
    check_confidence(confidence)
    n = int(d.size)
    if n < 2:
        return ShiftInterval(_NAN, _NAN, _NAN, False)
    k, coverage, exact = _critical(n, confidence)
    w = walsh_averages(d)
    return ShiftInterval(float(w[k - 1]), float(w[w.size - k]), coverage, exact)


def signed_rank_p(d: FloatArray) -> float:
    """Two-sided Wilcoxon signed-rank p-value of ``d`` (``scipy.stats.wilcoxon``, method "auto").

    NaN for no pairs; 1.0 when every difference is 0 (no evidence of a change; scipy would give NaN).
    """
    if d.size == 0:
        return _NAN
    if np.all(d == 0.0):
        return 1.0
    return float(sps.wilcoxon(d, alternative="two-sided").pvalue)


def min_attainable_p_paired(n_pairs: int) -> float:
    """Smallest two-sided exact signed-rank p-value with ``n_pairs`` pairs: 2 / 2**n (the rank test's floor;
    compare's paired verdict uses the t-test, whose floor is 0 from 2 pairs on: ``paired_t``)."""
    if n_pairs < 1:
        return 1.0
    return min(1.0, 2.0 ** (1 - n_pairs))


def paired_t(d: FloatArray, confidence: float) -> tuple[float, ShiftInterval, float]:
    """The paired t analysis of the within-pair differences ``d`` (log ratios for ratio metrics): the mean of
    ``d``, its Student-t interval at ``confidence`` (``estimate`` = the mean, inside it), and the two-sided
    one-sample t-test's p-value (``scipy.stats.ttest_1samp``): one estimator for the point, the interval and
    the test, so the interval excludes 0 exactly when p < 1 - confidence.

    Why the t and not the signed-rank test (issue 28): the rank test's p-value cannot go below 2 / 2**n, so at
    6 pairs and Holm over 6 gated comparisons it could not call even a 5.6x speed-up. The t statistic grows
    with the change's size relative to the spread. Under an A/A comparison the partners are exchangeable (the
    order within a pair is counterbalanced), so ``d`` is symmetric about 0, where the t-test keeps its level
    (conservative for heavy tails): docs/precision.md gives the simulated level and power at 3-10 pairs.
    The coverage reported is the nominal one (exact for normal ``d``). Degenerate cases: no pairs -> NaN; one
    pair -> the value, no interval, p NaN; every difference equal -> a zero-width interval, p 1.0 when they
    are 0 and 0.0 otherwise."""
    check_confidence(confidence)
    n = int(d.size)
    if n == 0:
        return _NAN, ShiftInterval(_NAN, _NAN, _NAN, False), _NAN
    mean = float(np.mean(d))
    if n < 2:
        return mean, ShiftInterval(_NAN, _NAN, _NAN, False, mean), _NAN
    if np.all(d == d[0]):
        return mean, ShiftInterval(mean, mean, confidence, False, mean), 1.0 if mean == 0.0 else 0.0
    res = sps.ttest_1samp(d, 0.0)
    ci = res.confidence_interval(confidence)
    return mean, ShiftInterval(float(ci.low), float(ci.high), confidence, False, mean), float(res.pvalue)


def min_pairs_for_verdict(family: int = 1, *, alpha: float = 0.05) -> int:
    """The fewest pairs with which a paired comparison can give a verdict at Holm's first level alpha /
    family: the paired t-test has no floor, so it is where compare pairs at all (``MIN_PAIRS``); below it a
    case falls back to the unpaired rank test (see ``stats.compare.min_repetitions``)."""
    del family, alpha  # the t-test's p-value reaches any level from 2 pairs on
    return MIN_PAIRS


def min_detectable_effect_paired(sd: float, n_pairs: int, *, confidence: float = 0.95, power: float = 0.8) -> float:
    """Approximate smallest detectable change with ``n_pairs`` pairs whose differences have SD ``sd``.

    NaN when the SD is undefined (fewer than 2 pairs); ``inf`` below ``MIN_PAIRS``, where compare does not
    pair a case at all (so no paired verdict is possible, whatever the change).
    """
    check_confidence(confidence)
    alpha = 1.0 - confidence
    if n_pairs < 2 or math.isnan(sd):
        return _NAN
    if n_pairs < MIN_PAIRS:
        return math.inf
    df = n_pairs - 1
    t_sum = float(sps.t.ppf(1.0 - alpha / 2.0, df) + sps.t.ppf(power, df))
    return t_sum * sd / math.sqrt(n_pairs)


def required_pairs(sd: float, effect: float, *, confidence: float = 0.95, power: float = 0.8) -> int:
    """Smallest number of pairs so that ``effect`` is detectable at within-pair SD ``sd`` (capped at 100 000)."""
    if effect <= 0.0 or math.isnan(sd):
        raise ValueError(f"need effect > 0 and a defined sd, got effect={effect}, sd={sd}")

    def detects(n: int) -> bool:
        return min_detectable_effect_paired(sd, n, confidence=confidence, power=power) <= effect

    return first_n(detects, _MAX_PAIRS)
