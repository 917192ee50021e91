"""Change points of a series (one value per point, in order): where its level shifts, and by how much.

Detection
---------
Hunter's two steps (Fleming et al., "Hunter: Using Change Point Detection to Hunt for Performance
Regressions", ICPE 2023; the method of Apache Otava), with the segmentation from ``ruptures``:

1. **Split.** The series is cut into windows of ``window`` points that overlap by half. In each window,
   ``ruptures.Binseg`` (binary segmentation, the divisive search E-divisive uses, here with the L2 cost: a
   shift of the mean) adds one split at a time, the most pronounced first; splitting stops at the first
   split whose two-sided Welch t-test between its neighbouring segments has a p-value above a relaxed
   threshold (10 x ``max_pvalue``, as Hunter's first pass). The union of the windows' splits are the
   candidates (a split within ``MIN_SEGMENT`` points of one already found is the same step seen twice).
2. **Merge.** While some candidate's t-test against its neighbouring segments has a p-value above
   ``max_pvalue``, the weakest is dropped and its neighbours are tested again.

Apache Otava itself (``apache-otava`` 0.8.0) is not used: it pins numpy 2.2.0 and scipy < 1.17 and pulls in
clients for BigQuery, PostgreSQL, Slack, Graphite and InfluxDB; MongoDB's ``signal-processing-algorithms``
(E-divisive in C) needs numpy < 2. ``ruptures`` needs only numpy and scipy. What differs from E-divisive is
the statistic that places a split (the L2 cost, i.e. the largest difference of means, rather than the energy
distance between the two sides' distributions); the t-test decides significance in both.

Size of a change
----------------
For each change point the segment before it (from the previous change point) and the segment after it
(to the next one) are compared as ``tunbench compare`` compares two runs: the change of the median,
``median(after) / median(before) - 1``, with the Hodges-Lehmann / Mann-Whitney interval of
``ratio_of_medians`` (its real coverage reported), or, for data with a value <= 0, the difference of the
medians with ``shift_interval``. The values are the points' medians, so a point is one observation.

Pure: values in, frozen dataclasses out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import ruptures as rpt
from scipy import stats as sps

from tunbench.stats._common import FloatArray, as_array, check_confidence
from tunbench.stats.shift import shift_interval
from tunbench.stats.summary import ratio_of_medians

DEFAULT_WINDOW = 50
"""Points per sliding window of the detection (``--window``; Otava's default)."""
DEFAULT_MAX_PVALUE = 0.001
"""Largest p-value of the t-test for a change point to be kept (``--max-pvalue``)."""
MIN_SEGMENT = 3
"""Fewest points on each side of a change point: a t-test needs more than two values to see a spread."""


@dataclass(frozen=True)
class ChangePoint:
    """A shift of the series' level: ``index`` is the first point of the new level.

    ``before`` / ``after``: the points of the segments on either side (from the previous change point to
    the next). ``change``: median(after) / median(before) - 1, or, when ``absolute``, median(after) -
    median(before); ``[ci_low, ci_high]`` its interval at ``confidence``, ``ci_coverage`` the interval's real
    coverage. ``pvalue``: the t-test between the two segments.
    """

    index: int
    before: tuple[int, int]  # [start, stop) of the segment before
    after: tuple[int, int]  # [start, stop) of the segment after
    median_before: float
    median_after: float
    change: float
    ci_low: float
    ci_high: float
    confidence: float
    ci_coverage: float
    pvalue: float
    absolute: bool


def change_points(
    values: Sequence[float],
    *,
    window: int = DEFAULT_WINDOW,
    max_pvalue: float = DEFAULT_MAX_PVALUE,
    confidence: float = 0.95,
    absolute: bool | None = None,
) -> list[ChangePoint]:
    """The change points of ``values`` (see the module docstring), in order; [] for a series too short to
    split (fewer than ``2 * MIN_SEGMENT`` points). ``absolute``: size changes as differences (True), as
    ratios (False), or as ratios unless a value is <= 0 (None)."""
    check_confidence(confidence)
    if window < 2 * MIN_SEGMENT:
        raise ValueError(f"window must be >= {2 * MIN_SEGMENT} points, got {window}")
    if not 0.0 < max_pvalue < 1.0:
        raise ValueError(f"max_pvalue must be in (0, 1), got {max_pvalue}")
    x = as_array(values)
    if x.size < 2 * MIN_SEGMENT:
        return []
    found = _detect(x, window, max_pvalue)
    bounds = [0, *(i for i, _ in found), int(x.size)]
    return [_sized(x, bounds[k], i, bounds[k + 2], p, confidence, absolute) for k, (i, p) in enumerate(found)]


def _ttest_p(left: FloatArray, right: FloatArray) -> float:
    """Two-sided Welch t-test between two segments; 1.0 when it cannot be computed (a side of < 2 values,
    no spread on either side)."""
    if left.size < 2 or right.size < 2:
        return 1.0
    with np.errstate(all="ignore"):
        p = float(sps.ttest_ind(left, right, equal_var=False).pvalue)
    return p if math.isfinite(p) else 1.0


def _split(x: FloatArray, weak_pvalue: float) -> list[int]:
    """One window's candidates: ruptures' binary segmentation adds one split at a time (the most
    pronounced first); splitting stops at the first whose t-test against its neighbours is weaker than
    ``weak_pvalue``."""
    n = int(x.size)
    most = n // MIN_SEGMENT - 1
    if most < 1:
        return []
    algo = rpt.Binseg(model="l2", min_size=MIN_SEGMENT, jump=1).fit(x)
    kept: list[int] = []
    for k in range(1, most + 1):
        try:
            bkps = [int(b) for b in algo.predict(n_bkps=k)[:-1]]
        except rpt.exceptions.BadSegmentationParameters:
            break
        new = [b for b in bkps if b not in kept]
        if len(new) != 1:
            break
        bounds = [0, *bkps, n]
        i = bounds.index(new[0])
        if _ttest_p(x[bounds[i - 1] : bounds[i]], x[bounds[i] : bounds[i + 1]]) > weak_pvalue:
            break
        kept.append(new[0])
    return sorted(kept)


def _merge(x: FloatArray, candidates: list[int], max_pvalue: float) -> list[tuple[int, float]]:
    """Hunter's merge step: while some change point's t-test against its neighbouring segments is weaker
    than ``max_pvalue``, drop the weakest and test its neighbours again. Returns (index, p-value)."""
    cps = sorted(set(candidates))
    while cps:
        bounds = [0, *cps, int(x.size)]
        ps = [_ttest_p(x[bounds[i - 1] : bounds[i]], x[bounds[i] : bounds[i + 1]]) for i in range(1, len(bounds) - 1)]
        worst = max(range(len(ps)), key=lambda i: ps[i])
        if ps[worst] <= max_pvalue:
            return list(zip(cps, ps, strict=True))
        del cps[worst]
    return []


def _detect(x: FloatArray, window: int, max_pvalue: float) -> list[tuple[int, float]]:
    """Split each window of ``window`` points (windows overlap by half) at a relaxed p-value (10x, as Hunter
    does), then merge the union at ``max_pvalue``."""
    weak = min(max_pvalue * 10.0, 0.5)
    n = int(x.size)
    step = max(1, window // 2)
    candidates: list[int] = []
    for start in range(0, n, step):
        stop = min(start + window, n)
        if stop - start < 2 * MIN_SEGMENT:
            break
        for c in _split(x[start:stop], weak):
            if all(abs(start + c - old) >= MIN_SEGMENT for old in candidates):  # a step seen by two windows
                candidates.append(start + c)
        if stop == n:
            break
    return _merge(x, candidates, max_pvalue)


def _sized(
    x: FloatArray, start: int, index: int, stop: int, pvalue: float, confidence: float, absolute: bool | None
) -> ChangePoint:
    before, after = x[start:index], x[index:stop]
    med_b, med_a = float(np.median(before)), float(np.median(after))
    if absolute is None:
        absolute = bool(np.any(before <= 0.0) or np.any(after <= 0.0))
    if absolute:
        ci = shift_interval(before, after, confidence)
        change, lo, hi, cov = med_a - med_b, ci.low, ci.high, ci.coverage
    else:
        r = ratio_of_medians(after, before, confidence=confidence)
        change, lo, hi, cov = r.value - 1.0, r.ci_low - 1.0, r.ci_high - 1.0, r.ci_coverage
    return ChangePoint(
        index=index,
        before=(start, index),
        after=(index, stop),
        median_before=med_b,
        median_after=med_a,
        change=change,
        ci_low=lo,
        ci_high=hi,
        confidence=confidence,
        ci_coverage=cov,
        pvalue=pvalue,
        absolute=absolute,
    )


def is_worse(cp: ChangePoint, *, higher_is_better: bool) -> bool:
    """A regression: the level moved the wrong way (lower when higher is better, higher when lower is)."""
    if math.isnan(cp.change) or cp.change == 0.0:
        return False
    return (cp.change < 0.0) == higher_is_better
