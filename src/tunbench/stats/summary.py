"""Per-case summaries (median with a confidence interval) and ratios of medians with a distribution-free CI.

Confidence interval of the median — the choice and why
------------------------------------------------------
Tunbench cases are typically repeated 3–10 times. At those sizes the bootstrap percentile interval
of the median is dishonest: the bootstrap median can only take values near the order statistics,
so for n = 3 the "95 %" interval is [min, max], whose true coverage is 1 - 2 * 0.5**3 = 75 %.

``summarize`` therefore supports two methods; ``ci_method="auto"`` (default, what every report uses) is the
order-statistic interval at every n:

* ``"order-statistic"``: the classical distribution-free interval [x_(k), x_(n-k+1)] from the
  Binomial(n, 1/2) distribution of the number of values below the true median (the interval
  ``scipy.stats.quantile_test`` gives). Its coverage is exact for continuous data (no assumption on the
  shape), at least ``confidence`` (the narrowest such symmetric interval is chosen: 0.9785 at n = 10, 0.9567
  at n = 25, 0.9727 at n = 60), and *reported* in ``Summary.ci_coverage``. If even [min, max] cannot reach
  the requested confidence (n <= 5 at 95 %), the interval is [min, max] and ``ci_coverage`` says what it
  really is (n = 3: 0.75, n = 4: 0.875, n = 5: 0.9375). ``checks.stability_warnings`` flags those n.
* ``"bootstrap"`` (only when asked for): percentile bootstrap of the median with ``resamples`` resamples
  from ``numpy.random.default_rng(seed)``; ``ci_coverage`` is then the nominal ``confidence``, which it does
  not reach: on lognormal data it covered about 0.92-0.95 for n = 10-30. Until issue 43 (item 7) ``auto``
  used it from n = 10 on, so the report's "95%" interval of 10 or more values covered about 93%.

Confidence interval of a ratio
------------------------------
``ratio_of_medians`` (e.g. tunnel / direct throughput; its point is the Hodges-Lehmann estimate that goes
with its interval, see ``Ratio``) used a percentile bootstrap too, with the same
flaw at small n: 89 % real coverage at 3 vs 3 (simulated, lognormal) where it claimed 95 %. It now
uses the Hodges-Lehmann / Mann-Whitney interval on log values (``shift.ratio_interval``): exact
coverage under a scale model (``numerator ~ denominator * r``), reported in ``Ratio.ci_coverage``
(3 vs 3: 0.90, the most any interval from 3 vs 3 repetitions can honestly claim; 5 vs 5: 0.968;
10 vs 10: 0.957). The simulation test ``tests/unit/test_stats_coverage.py`` checks those numbers.

Undefined values are NaN, never an exception: n = 0 gives NaN everywhere; n = 1 gives the value as
median/mean/min/max but NaN stdev, cv and CI (one value says nothing about spread); ``cv`` is NaN
when the mean is 0. Non-finite inputs raise ``ValueError``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

import numpy as np
from scipy import stats as sps

from tunbench.stats._common import (
    FloatArray,
    Values,
    as_array,
    bootstrap_medians,
    check_confidence,
    check_resamples,
    percentile_interval,
)
from tunbench.stats.shift import ratio_interval

CIMethod: TypeAlias = Literal["auto", "order-statistic", "bootstrap"]

DEFAULT_RESAMPLES = 10_000

_NAN = float("nan")


@dataclass(frozen=True)
class Summary:
    """Location and spread of one case's repetitions.

    ``stdev`` is the sample standard deviation (ddof=1); ``cv`` = stdev / |mean|.
    ``[ci_low, ci_high]`` is a confidence interval for the population *median*, computed by
    ``ci_method`` ("order-statistic", the default at every n; "bootstrap" only when asked for; "none" when
    n < 2); ``ci_coverage`` is its exact coverage (order-statistic) or its nominal coverage (bootstrap),
    NaN when n < 2.
    """

    n: int
    median: float
    mean: float
    min: float
    max: float
    stdev: float
    cv: float
    ci_low: float
    ci_high: float
    confidence: float
    ci_coverage: float
    ci_method: Literal["order-statistic", "bootstrap", "none"]


@dataclass(frozen=True)
class Ratio:
    """The ratio numerator / denominator, with a distribution-free CI of the ratio, from ONE estimator.

    ``value`` is the Hodges-Lehmann estimate on log values (exp of the median of the pairwise differences
    of logs: under the scale model ``numerator ~ denominator * r`` it estimates ``r``, the ratio of the
    medians), and ``[ci_low, ci_high]`` the Hodges-Lehmann / Mann-Whitney interval that belongs to it
    (``shift.ratio_interval``), so the value always lies inside its interval. (The plain ratio of the two
    medians did not: on bimodal samples it could fall outside its own interval, issue 28.)
    ``ci_coverage`` is the interval's exact coverage under the scale model (it can be below
    ``confidence`` when the sample sizes allow nothing better: 0.90 at 3 vs 3).

    NaN when undefined: everything is NaN if either side is empty; with a value <= 0 (no logarithm) the
    value is the plain ratio of the medians (NaN for a denominator median of 0) and there is no interval;
    the CI (and ``ci_coverage``) is NaN if either side has fewer than 2 values.
    """

    value: float
    ci_low: float
    ci_high: float
    confidence: float
    n_numerator: int
    n_denominator: int
    ci_coverage: float = _NAN


@functools.lru_cache(maxsize=256)
def order_statistic_interval(n: int, confidence: float) -> tuple[int, int, float]:
    """Distribution-free CI of the median for a sorted sample of size ``n`` >= 2.

    Returns 0-based indices ``(lo, hi)`` into the sorted sample and the exact coverage
    P(x_(lo) <= true median <= x_(hi)) for continuous data. Picks the narrowest symmetric interval
    whose coverage is >= ``confidence``; if none is (small n) returns (0, n-1) and its coverage.
    """
    if n < 2:
        raise ValueError(f"need n >= 2 for an order-statistic interval, got {n}")
    check_confidence(confidence)
    best_k, best_cov = 1, _coverage(n, 1)
    for k in range(2, n // 2 + 1):
        cov = _coverage(n, k)
        if cov < confidence:
            break
        best_k, best_cov = k, cov
    return best_k - 1, n - best_k, best_cov


def _coverage(n: int, k: int) -> float:
    """P(k <= B <= n-k), B ~ Binomial(n, 1/2): coverage of [x_(k), x_(n-k+1)] (1-based)."""
    return float(sps.binom.cdf(n - k, n, 0.5) - sps.binom.cdf(k - 1, n, 0.5))


def summarize(
    values: Values,
    *,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    ci_method: CIMethod = "auto",
) -> Summary:
    """Summarise one case's repetitions; see the module docstring for the CI method."""
    check_confidence(confidence)
    check_resamples(resamples)
    if ci_method not in ("auto", "order-statistic", "bootstrap"):
        raise ValueError(f"unknown ci_method {ci_method!r}")
    x = as_array(values)
    n = int(x.size)
    if n == 0:
        return Summary(0, _NAN, _NAN, _NAN, _NAN, _NAN, _NAN, _NAN, _NAN, confidence, _NAN, "none")
    mean = float(np.mean(x))
    stdev = float(np.std(x, ddof=1)) if n >= 2 else _NAN
    cv = stdev / abs(mean) if mean != 0.0 else _NAN
    method, lo, hi, coverage = _median_ci(x, confidence, resamples, seed, ci_method)
    return Summary(
        n=n,
        median=float(np.median(x)),
        mean=mean,
        min=float(np.min(x)),
        max=float(np.max(x)),
        stdev=stdev,
        cv=cv,
        ci_low=lo,
        ci_high=hi,
        confidence=confidence,
        ci_coverage=coverage,
        ci_method=method,
    )


def _median_ci(
    x: FloatArray, confidence: float, resamples: int, seed: int, ci_method: CIMethod
) -> tuple[Literal["order-statistic", "bootstrap", "none"], float, float, float]:
    n = x.size
    if n < 2:
        return "none", _NAN, _NAN, _NAN
    if ci_method == "bootstrap":  # never for "auto": its nominal coverage is not its real one
        meds = bootstrap_medians(x, resamples, np.random.default_rng(seed))
        lo, hi = percentile_interval(meds, confidence)
        return "bootstrap", lo, hi, confidence
    i, j, coverage = order_statistic_interval(n, confidence)
    xs = np.sort(x)
    return "order-statistic", float(xs[i]), float(xs[j]), coverage


def ratio_of_medians(
    numerator: Values,
    denominator: Values,
    *,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Ratio:
    """Ratio of medians (e.g. tunnel throughput / direct throughput) with a distribution-free CI.

    The interval is ``shift.ratio_interval`` (Hodges-Lehmann on logs, exact Mann-Whitney critical values),
    deterministic; ``resamples`` and ``seed`` are accepted for existing callers and not used (the interval
    was a bootstrap before, with too little coverage at small n: see the module docstring).
    """
    check_confidence(confidence)
    check_resamples(resamples)
    del seed
    num = as_array(numerator, name="numerator")
    den = as_array(denominator, name="denominator")
    n_num, n_den = int(num.size), int(den.size)
    if not (n_num and n_den):
        return Ratio(_NAN, _NAN, _NAN, confidence, n_num, n_den, _NAN)
    if np.any(num <= 0.0) or np.any(den <= 0.0):  # no logarithm: the ratio of the medians, and no interval
        den_med = float(np.median(den))
        value = float(np.median(num)) / den_med if den_med != 0.0 else _NAN
        return Ratio(value, _NAN, _NAN, confidence, n_num, n_den, _NAN)
    ci = ratio_interval(den, num, confidence)
    return Ratio(ci.estimate, ci.low, ci.high, confidence, n_num, n_den, ci.coverage)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (q in 0..100) of `values`, linearly interpolated between order statistics
    (numpy's default method); None when there are no values."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else None
