"""Shared helpers for the stats package: input validation and the vectorised bootstrap.

Everything here is pure: arrays in, arrays out, randomness only from a ``numpy.random.Generator``
that the caller seeds.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

FloatArray: TypeAlias = npt.NDArray[np.float64]
Values: TypeAlias = Sequence[float] | FloatArray
"""Accepted input: a sequence of numbers or a 1-D float array (one value per repetition)."""

# Upper bound on the number of floats materialised at once by the bootstrap (about 8 MB).
_BOOTSTRAP_CHUNK_FLOATS = 1_000_000


def as_array(values: Values, *, name: str = "values") -> FloatArray:
    """Return ``values`` as a 1-D float64 array; raise ``ValueError`` on NaN/inf or wrong shape.

    Non-finite values are rejected rather than dropped: a failed repetition should be handled (and
    reported) by the caller, not silently shrink n. ``checks.stability_warnings`` is the one function
    that accepts them, so that it can report them.
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D sequence of numbers, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite values; drop or re-run failed repetitions")
    return arr


def check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def check_resamples(resamples: int) -> None:
    if resamples < 100:
        raise ValueError(f"resamples must be >= 100, got {resamples}")


def bootstrap_medians(values: FloatArray, resamples: int, rng: np.random.Generator) -> FloatArray:
    """Medians of ``resamples`` bootstrap resamples (with replacement) of ``values`` (n >= 1)."""
    n = values.size
    out = np.empty(resamples, dtype=np.float64)
    rows = max(1, _BOOTSTRAP_CHUNK_FLOATS // n)
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = np.median(values[idx], axis=1)
    return out


def percentile_interval(samples: FloatArray, confidence: float) -> tuple[float, float]:
    """Equal-tailed percentile interval of bootstrap ``samples``; NaN if any sample is non-finite."""
    if not np.all(np.isfinite(samples)):
        return (float("nan"), float("nan"))
    alpha = 1.0 - confidence
    lo, hi = np.quantile(samples, [alpha / 2.0, 1.0 - alpha / 2.0])
    return (float(lo), float(hi))


def first_n(detects: Callable[[int], bool], most: int) -> int:
    """The smallest n in 2..most for which detects(n) holds, where detects is monotone in n (an MDE
    shrinks as n grows): bisection; `most` when even that does not detect."""
    lo, hi = 2, most
    if not detects(hi):
        return most
    while lo < hi:
        mid = (lo + hi) // 2
        if detects(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def null_cdf(counts: Sequence[int], total: int) -> tuple[float, ...]:
    """A rank statistic's null CDF from the number of arrangements giving each value (P(S <= s))."""
    return tuple(c / total for c in itertools.accumulate(counts))


def order_statistic_k(cdf: Sequence[float] | None, count: int, sd: float, confidence: float) -> tuple[int, float, bool]:
    """The 1-based k of the interval [x_(k), x_(count-k+1)] over `count` sorted estimates (pairwise
    differences, Walsh averages) whose rank statistic has this null CDF: the narrowest interval covering
    at least `confidence`, with its exact coverage (True). Without a CDF (large samples): the normal
    approximation with a continuity correction, as R's wilcox.test does, at the nominal coverage (False)."""
    if cdf is not None:
        best_k, best_cov = 1, 1.0 - 2.0 * cdf[0]
        for k in range(2, count // 2 + 1):
            cov = 1.0 - 2.0 * cdf[k - 1]
            if cov < confidence:
                break
            best_k, best_cov = k, cov
        return best_k, best_cov, True
    z = float(sps.norm.ppf(0.5 + confidence / 2.0))
    return max(1, math.floor(count / 2.0 - z * sd - 0.5) + 1), confidence, False
