"""Change points of a series (one point per run or commit, each with its trials, in order): where its level
shifts, and by how much.

Points and their trials
-----------------------
A point is a run (or a commit's runs) with its n trials. Its **level** is the median of its trials (of their
logs for ratio data), so one bad trial does not move it. The unit of every test and interval is the point,
not the trial: the trials of one run share that run's state (the host, the build, the day), so treating them
as independent would call every run-to-run wobble a change. The trials do two other things: they set the
level robustly, and their spread (the pooled within-point SD / sqrt(trials)) is the smallest point-to-point
difference that can count as a disturbance (below).

Robust to a disturbed point (issue 28 item 4)
---------------------------------------------
A point measured while something else ran (two runs at once) can sit far below its neighbours. Fed to a
t-test, it inflates its segment's variance and hides a real step behind it (500, 465, **301**, 518, 450 |
273, 280, 306, 307, 302 Mbit/s: no change point found). So before each segment-to-segment test, at most one
**disturbed** point per segment is set aside: the point whose level is farthest from the others' median, if
its modified z-score against the others (Iglewicz & Hoaglin: 0.6745 x distance / MAD of the others, the MAD
floored at the trials' own spread) exceeds ``DISTURBED_Z``, in a segment of at least ``MIN_DISTURBED_SEGMENT``
points. Points known to be interfered with (the monitor's flag) are left out before any of this (history).

Detection
---------
Hunter's two steps (Fleming et al., "Hunter: Using Change Point Detection to Hunt for Performance
Regressions", ICPE 2023; the method of Apache Otava), with the segmentation from ``ruptures``:

1. **Split.** The series of levels is cut into spans of ``span`` points that overlap by half. In each
   span, ``ruptures.Binseg`` (binary segmentation, L2 cost: a shift of the mean) adds one split at a time,
   the most pronounced first; splitting stops at the first split whose test between its neighbouring
   segments has a p-value above a relaxed threshold (10 x ``max_pvalue``, as Hunter's first pass). The union
   of the spans' splits are the candidates (a split within ``MIN_SEGMENT`` points of one already found is
   the same step seen twice).
2. **Merge.** While some candidate's test against its neighbouring segments has a p-value above
   ``max_pvalue``, the weakest is dropped and its neighbours are tested again.

The test is the two-sided Welch t-test between the two segments' levels, disturbed points set aside.

Apache Otava itself (``apache-otava`` 0.8.0) is not used: it pins numpy 2.2.0 and scipy < 1.17 and pulls in
clients for BigQuery, PostgreSQL, Slack, Graphite and InfluxDB; MongoDB's ``signal-processing-algorithms``
(E-divisive in C) needs numpy < 2. ``ruptures`` needs only numpy and scipy.

Size of a change (issue 28 items 1 and 5)
-----------------------------------------
For each change point, the segment before it (from the previous change point) and the segment after it (to
the next one), disturbed points set aside, are compared with one estimator for the point and the interval:
the Hodges-Lehmann ratio of the levels (``shift.ratio_interval``), minus 1, or for data with a value <= 0 the
HL shift. The split was chosen on the same data, so an interval computed as if it had not been is too
optimistic for a step found only because the noise made it look large (the "winner's curse": simulated, the
old interval covered a +5.1% step in 89% of 2000 series where it said 95%, and the estimate was 35% too
large). The interval is therefore made **simultaneous over every split the search could have chosen** in
that stretch (Bonferroni over its ``splits`` = points - 2 x ``MIN_SEGMENT`` + 1 candidate places, each
interval at level 1 - (1 - confidence) / splits): whichever split is chosen, its interval is one of a family
that covers all at once with the stated confidence, so choosing cannot break it (post-selection inference by
simultaneity, as Berk et al.'s PoSI). The estimate itself still carries the winner's curse; docs/history.md
states the simulated coverage and bias (``scripts/stats_sims.py history``).
The direction of a change (``is_worse``) is its interval's: a change whose interval spans 0 is neither a
regression nor an improvement.

A gate over many series (issue 43 item 6)
-----------------------------------------
The p-value of a change point is the t-test's between two segments that the search chose: the split, the
segments' ends and the disturbed points were all picked on the same data, so it is no p-value of a test
fixed in advance. On flat series of 20 points (3 trials, 5% between points, 2% within) a regression change
point is found in about 1% of series at ``max_pvalue`` = 0.001 (10 of 960, seeded), ten times the nominal
level, and a gate over 48 such series (``history --fail-on-regression-since``) failed in 7 of 20 draws.
Bonferroni over the candidate splits, as for the interval, does not mend it (still about 2% at 0.001): the
segments' ends are chosen too, and a t-test between 3-point segments, whose variance rests on 2 degrees of
freedom, gives extreme p-values on ordinary noise.

``regression_test`` gives a series a p-value that a gate can correct across series: **Pettitt's rank
statistic of a shift, one-sided, maximised over the splits after the reference, calibrated by
permutation**. Over the points from ``start`` on (the gate passes the last change point before the
reference, so an older change is not taken for a new one), the levels are ranked; for each split ``j`` at or
after ``first`` (``MIN_SEGMENT`` points on each side), the Mann-Whitney rank sum of the points from ``j`` on
is standardised against its mean and SD under no change, signed so that a regression (lower throughput,
higher cost) is positive, and the statistic is its largest value over the splits. Under the null hypothesis
that those points have no change (they are exchangeable), shuffling them gives the statistic's exact
distribution, whatever the noise's shape; with B shuffles (``permutations``, from a seeded generator),
p = (1 + e) / (B + 1), e the shuffles at least as extreme, is a valid p-value: P(p <= a) <= a for every a.
The maximum over the splits is taken in every shuffle too, so choosing the split costs what it should; ranks
make one disturbed point count as one rank. The gate fails a series when the detection above finds a
regression change point after the reference **and** its p-value, Holm-adjusted over the m series the gate
checks, is at most alpha: the family-wise rate of failing on flat series is at most alpha.

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
from tunbench.stats.outliers import modified_z_scores
from tunbench.stats.shift import ratio_interval, shift_interval

DEFAULT_SPAN = 50
"""Points per sliding span of the detection (``history --span``; what Otava calls its window, and its default)."""
DEFAULT_MAX_PVALUE = 0.001
"""Largest p-value of the test for a change point to be kept (``--max-pvalue``)."""
MIN_SEGMENT = 3
"""Fewest points on each side of a change point: a t-test needs more than two values to see a spread."""
DISTURBED_Z = 5.0
"""A point whose level's modified z-score against the rest of its segment exceeds this is set aside as
disturbed. Above Iglewicz & Hoaglin's 3.5: the others' MAD is taken from as few as 4 points, and at 3.5 or 4
the search set aside ordinary points often enough to add false change points (docs/history.md); the issue's
disturbed point scores about 6."""

MIN_DISTURBED_SEGMENT = 5
"""A segment sets a point aside only when it has at least this many points (the others' MAD needs 4)."""

PointValues = float | Sequence[float]
"""One point: its trials' values, or a single value."""


@dataclass(frozen=True)
class ChangePoint:
    """A shift of the series' level: ``index`` is the first point of the new level.

    ``before`` / ``after``: the points of the segments on either side (from the previous change point to
    the next). ``median_before`` / ``median_after``: the median of each segment's levels (disturbed points
    set aside, in the data's unit). ``change``: the Hodges-Lehmann ratio of the levels after / before minus 1
    (or, when ``absolute``, the HL shift), ``[ci_low, ci_high]`` its interval, simultaneous over the ``splits``
    places the search could have cut (Bonferroni: each at 1 - (1 - confidence) / splits, see the module
    docstring), ``ci_coverage`` the simultaneous coverage that gives (at least; from each interval's exact
    coverage under independent points). ``pvalue``: the test between the two segments. ``disturbed``: the
    indices of points set aside as disturbed in the two segments.
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
    disturbed: tuple[int, ...] = ()
    splits: int = 1


def change_points(
    values: Sequence[PointValues],
    *,
    span: int = DEFAULT_SPAN,
    max_pvalue: float = DEFAULT_MAX_PVALUE,
    confidence: float = 0.95,
    absolute: bool | None = None,
) -> list[ChangePoint]:
    """The change points of a series of points (each its trials' values, or one value; see the module
    docstring), in order; [] for a series too short to split (fewer than ``2 * MIN_SEGMENT`` points).
    ``absolute``: size changes as differences (True), as ratios (False), or as ratios unless a value is <= 0
    (None)."""
    check_confidence(confidence)
    if span < 2 * MIN_SEGMENT:
        raise ValueError(f"span must be >= {2 * MIN_SEGMENT} points, got {span}")
    if not 0.0 < max_pvalue < 1.0:
        raise ValueError(f"max_pvalue must be in (0, 1), got {max_pvalue}")
    raw = [as_array(np.atleast_1d(np.asarray(v, dtype=np.float64)), name="point") for v in values]
    if any(r.size == 0 for r in raw):
        raise ValueError("every point needs at least one value")
    if len(raw) < 2 * MIN_SEGMENT:
        return []
    if absolute is None:
        absolute = any(bool(np.any(r <= 0.0)) for r in raw)
    series = _Series(raw, absolute)
    found = _detect(series, span, max_pvalue)
    bounds = [0, *(i for i, _ in found), len(raw)]
    return [_sized(series, bounds[k], i, bounds[k + 2], p, confidence) for k, (i, p) in enumerate(found)]


class _Series:
    """The points on the scale they are compared on (logs for ratio data): each point's trials, its level
    (their median), and the noise floor a disturbance must exceed (the pooled within-point SD over sqrt of
    the trials per point; 0 when every point has a single value)."""

    def __init__(self, raw: list[FloatArray], absolute: bool) -> None:
        self.absolute = absolute
        self.raw = raw
        self.points = raw if absolute else [np.log(r) for r in raw]
        self.levels = np.array([float(np.median(p)) for p in self.points])
        dev = [p - p.mean() for p in self.points if p.size >= 2]
        df = sum(d.size - 1 for d in dev)
        within = math.sqrt(sum(float(np.sum(d**2)) for d in dev) / df) if df else 0.0
        per_point = float(np.mean([p.size for p in self.points]))
        self.floor = within / math.sqrt(per_point)

    def kept(self, start: int, stop: int) -> list[int]:
        """The points of [start, stop) without its disturbed point, if it has one (module docstring)."""
        idx = list(range(start, stop))
        if len(idx) < MIN_DISTURBED_SEGMENT:
            return idx
        lv = self.levels[idx]
        far = int(np.argmax(np.abs(lv - np.median(lv))))
        others = np.delete(lv, far)
        mad = float(np.median(np.abs(others - np.median(others))))
        scale = max(mad, 0.6745 * 1.4826 * self.floor)  # MAD floored at the trials' own spread
        if scale <= 0.0:
            z = float(np.max(np.abs(modified_z_scores(lv))))
        else:
            z = 0.6745 * abs(float(lv[far]) - float(np.median(others))) / scale
        if z > DISTURBED_Z:
            del idx[far]
        return idx


def _ttest_p(left: FloatArray, right: FloatArray) -> float:
    """Two-sided Welch t-test between two segments' levels; 1.0 when it cannot be computed (a side of < 2
    values, no spread on either side)."""
    if left.size < 2 or right.size < 2:
        return 1.0
    with np.errstate(all="ignore"):
        p = float(sps.ttest_ind(left, right, equal_var=False).pvalue)
    return p if math.isfinite(p) else 1.0


def _segments_p(s: _Series, start: int, mid: int, stop: int) -> float:
    """The test between [start, mid) and [mid, stop), each without its disturbed point."""
    return _ttest_p(s.levels[s.kept(start, mid)], s.levels[s.kept(mid, stop)])


def _split(s: _Series, start: int, stop: int, weak_pvalue: float) -> list[int]:
    """One span's candidates (absolute indices): ruptures' binary segmentation adds one split at a time (the
    most pronounced first); splitting stops at the first whose test against its neighbours is weaker than
    ``weak_pvalue``."""
    n = stop - start
    most = n // MIN_SEGMENT - 1
    if most < 1:
        return []
    algo = rpt.Binseg(model="l2", min_size=MIN_SEGMENT, jump=1).fit(s.levels[start:stop])
    kept: list[int] = []
    for k in range(1, most + 1):
        try:
            bkps = [start + int(b) for b in algo.predict(n_bkps=k)[:-1]]
        except rpt.exceptions.BadSegmentationParameters:
            break
        new = [b for b in bkps if b not in kept]
        if len(new) != 1:
            break
        bounds = [start, *bkps, stop]
        i = bounds.index(new[0])
        if _segments_p(s, bounds[i - 1], bounds[i], bounds[i + 1]) > weak_pvalue:
            break
        kept.append(new[0])
    return sorted(kept)


def _merge(s: _Series, candidates: list[int], max_pvalue: float) -> list[tuple[int, float]]:
    """Hunter's merge step: while some change point's test against its neighbouring segments is weaker than
    ``max_pvalue``, drop the weakest and test its neighbours again. Returns (index, p-value)."""
    cps = sorted(set(candidates))
    n = len(s.levels)
    while cps:
        bounds = [0, *cps, n]
        ps = [_segments_p(s, bounds[i - 1], bounds[i], bounds[i + 1]) for i in range(1, len(bounds) - 1)]
        worst = max(range(len(ps)), key=lambda i: ps[i])
        if ps[worst] <= max_pvalue:
            return list(zip(cps, ps, strict=True))
        del cps[worst]
    return []


def _detect(s: _Series, span: int, max_pvalue: float) -> list[tuple[int, float]]:
    """Split each span of ``span`` points (spans overlap by half) at a relaxed p-value (10x, as Hunter
    does), then merge the union at ``max_pvalue``."""
    weak = min(max_pvalue * 10.0, 0.5)
    n = len(s.levels)
    step = max(1, span // 2)
    candidates: list[int] = []
    for start in range(0, n, step):
        stop = min(start + span, n)
        if stop - start < 2 * MIN_SEGMENT:
            break
        for c in _split(s, start, stop, weak):
            if all(abs(c - old) >= MIN_SEGMENT for old in candidates):  # a step seen by two spans
                candidates.append(c)
        if stop == n:
            break
    return _merge(s, candidates, max_pvalue)


def _sized(s: _Series, start: int, index: int, stop: int, pvalue: float, confidence: float) -> ChangePoint:
    before, after = s.kept(start, index), s.kept(index, stop)
    lb, la = s.levels[before], s.levels[after]
    splits = max(1, (stop - start) - 2 * MIN_SEGMENT + 1)
    level = 1.0 - (1.0 - confidence) / splits  # simultaneous over every split the search could have chosen
    if s.absolute:
        ci = shift_interval(lb, la, level)
        change, lo, hi, med_b, med_a = ci.estimate, ci.low, ci.high, float(np.median(lb)), float(np.median(la))
    else:
        ci = ratio_interval(np.exp(lb), np.exp(la), level)
        change, lo, hi = ci.estimate - 1.0, ci.low - 1.0, ci.high - 1.0
        med_b, med_a = math.exp(float(np.median(lb))), math.exp(float(np.median(la)))
    disturbed = tuple(i for i in range(start, stop) if i not in before and i not in after)
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
        ci_coverage=1.0 - (1.0 - ci.coverage) * splits if math.isfinite(ci.coverage) else ci.coverage,
        pvalue=pvalue,
        absolute=s.absolute,
        disturbed=disturbed,
        splits=splits,
    )


def is_worse(cp: ChangePoint, *, higher_is_better: bool) -> bool:
    """A regression: the change's interval lies on the wrong side of 0 (below it when higher is better, above
    it when lower is). Without an interval, the estimate's side."""
    return _side(cp) == (-1 if higher_is_better else 1)


def is_better(cp: ChangePoint, *, higher_is_better: bool) -> bool:
    """An improvement: the change's interval lies on the good side of 0."""
    return _side(cp) == (1 if higher_is_better else -1)


def _side(cp: ChangePoint) -> int:
    if math.isfinite(cp.ci_low) and math.isfinite(cp.ci_high):
        return 1 if cp.ci_low > 0.0 else -1 if cp.ci_high < 0.0 else 0
    if math.isnan(cp.change) or cp.change == 0.0:
        return 0
    return 1 if cp.change > 0.0 else -1


DEFAULT_PERMUTATIONS = 9_999
"""Shuffles of ``regression_test`` (at least: more where alpha / m needs them, see ``permutations_for``)."""


@dataclass(frozen=True)
class RegressionTest:
    """``regression_test``'s answer: ``pvalue`` of the largest standardised shift toward worse (``statistic``,
    Pettitt's rank statistic, one-sided) over ``splits`` splits at or after the reference, from
    ``permutations`` shuffles of the ``points`` points tested."""

    pvalue: float
    statistic: float
    points: int
    splits: int
    permutations: int


def permutations_for(level: float) -> int:
    """Shuffles enough to resolve a p-value at ``level`` (the smallest Holm level, alpha / m): at least 20 / level
    (p can go 20 times below it), at least ``DEFAULT_PERMUTATIONS``."""
    return max(DEFAULT_PERMUTATIONS, math.ceil(20.0 / level) - 1)


def regression_test(
    values: Sequence[PointValues],
    *,
    first: int,
    higher_is_better: bool,
    start: int = 0,
    absolute: bool | None = None,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> RegressionTest:
    """The permutation p-value that the points from ``start`` on shift toward worse at some point at or after
    ``first`` (see "A gate over many series" above). ``values``: the series' points as ``change_points`` takes
    them; their levels are compared (the median of each point's trials, of their logs for ratio data: the
    ranks are the same either way). p = 1 when no split is possible (too few points after ``first``)."""
    raw = [np.atleast_1d(np.asarray(v, dtype=np.float64)) for v in values]
    if permutations < 1:
        raise ValueError(f"permutations must be >= 1, got {permutations}")
    levels = np.array([float(np.median(r)) for r in raw[start:]])
    n = levels.size
    lo = max(first - start, MIN_SEGMENT)
    splits = np.arange(lo, n - MIN_SEGMENT + 1)
    if splits.size == 0:
        return RegressionTest(1.0, math.nan, n, 0, 0)
    ranks = sps.rankdata(levels)
    sign = -1.0 if higher_is_better else 1.0  # a regression: the later points rank lower (or higher)
    after = (n - splits).astype(np.float64)
    mean = after * (n + 1) / 2.0
    sd = np.sqrt(splits * after * (n + 1) / 12.0)

    def stat(r: FloatArray) -> FloatArray:
        """The largest standardised rank sum of the points after each split, for each row of ``r``."""
        tail = np.cumsum(r[..., ::-1], axis=-1)[..., ::-1]  # tail[..., j]: the sum of ranks j..n-1
        z = sign * (tail[..., splits] - mean) / sd
        return np.asarray(np.max(z, axis=-1), dtype=np.float64)

    observed = float(stat(ranks))
    rng = np.random.default_rng(seed)
    extreme, done, chunk = 0, 0, max(1, 2_000_000 // max(n, 1))
    while done < permutations:
        k = min(chunk, permutations - done)
        shuffled = rng.permuted(np.broadcast_to(ranks, (k, n)), axis=1)
        extreme += int(np.count_nonzero(stat(shuffled) >= observed - 1e-9))
        done += k
    return RegressionTest((1 + extreme) / (1 + permutations), observed, n, int(splits.size), permutations)
