"""What an A/A calibration says about a budget: the MDE a paired comparison can expect per minute.

`tunbench calibrate` measures the same tunnel twice, as two labels of one run in paired blocks, so the
within-pair log ratios ``d_k = ln(b_k / a_k)`` are pure noise. Their SD ``s_d`` is the noise a paired
comparison on this host has to see through (``tunbench.stats.paired``), and the MDE of a paired comparison
with ``n`` pairs is ``(t_{1 - level/2} + t_{power}) * s_d / sqrt(n)`` at df = n - 1
(``min_detectable_effect_paired``; NaN while the spread is undefined).

Projection to a budget: a budget of ``T`` seconds buys ``floor((T - overhead_s) / pair_s)`` pairs, ``pair_s``
the wall time one pair took in the calibration and ``overhead_s`` what a run costs besides its trials (start,
provenance, the store). The projected MDE is the formula above at that many pairs with the SD
measured now, so it falls about as ``1 / sqrt(pairs)``. That assumes what the calibration cannot check:

* the within-pair noise stays as measured (the host does not get noisier or quieter, and no slower drift
  appears over a longer run than over the calibration),
* pairs are independent (the paired blocks see no drift that spans pairs), and
* the comparison measures the same metric with the same trial length and set-up per pair.

``level`` is the significance level the comparison will use: ``alpha / family`` for Holm's first rejection
over ``family`` gated comparisons (compare's MDE column is computed at that level too). The SD from a few
pairs is itself uncertain: ``pair_sd_ci`` is its normal-theory (chi-square) interval at ``confidence``, with
8 pairs about 0.66x to 2.0x the estimate, and the projected MDEs are uncertain by the same factor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from tunbench.stats._common import Values, as_array, check_confidence
from tunbench.stats.compare import DEFAULT_POWER
from tunbench.stats.paired import min_detectable_effect_paired, required_pairs

DEFAULT_BUDGETS_S = (60.0, 120.0, 300.0, 600.0)
"""The budgets `tunbench calibrate` projects to: 1, 2, 5 and 10 minutes."""


@dataclass(frozen=True)
class Projection:
    """A budget of ``budget_s`` seconds: ``pairs`` pairs and the MDE they give (a fraction; inf: the test
    cannot reach the level with so few pairs; NaN: the noise is undefined)."""

    budget_s: float
    pairs: int
    mde: float


@dataclass(frozen=True)
class NoiseBudget:
    """One metric's A/A noise and what it means for a budget (see the module docstring).

    ``n_pairs``: pairs measured; ``pair_sd``: SD of their log ratios; ``pair_sd_ci``: its interval;
    ``trial_cv``: the CV of single trials, both labels pooled (each around its own label's mean); ``mde``: the
    MDE at the pairs measured; ``projections``: the MDE per budget; ``target_pairs``, ``target_s``: the pairs
    and seconds (overhead included) a comparison needs to detect a change of ``target`` (0 and NaN when the
    noise is undefined).
    """

    n_pairs: int
    pair_sd: float
    pair_sd_ci: tuple[float, float]
    trial_cv: float
    pair_s: float
    level: float
    mde: float
    projections: tuple[Projection, ...]
    target: float
    target_pairs: int
    target_s: float


def noise_budget(
    baseline: Values,
    candidate: Values,
    pair_s: float,
    *,
    overhead_s: float = 0.0,
    budgets_s: Sequence[float] = DEFAULT_BUDGETS_S,
    confidence: float = 0.95,
    family: int = 1,
    power: float = DEFAULT_POWER,
    target: float = 0.03,
) -> NoiseBudget:
    """The noise of A/A pairs (``baseline[k]``, ``candidate[k]`` measured as a pair, values > 0) and the MDE a
    paired comparison can expect per budget, each pair costing ``pair_s`` seconds and a run ``overhead_s``
    besides; the significance level is ``(1 - confidence) / family`` (Holm's first rejection over ``family``
    gated comparisons)."""
    check_confidence(confidence)
    if family < 1:
        raise ValueError(f"family must be >= 1, got {family}")
    if not pair_s > 0.0 or not math.isfinite(pair_s):
        raise ValueError(f"pair_s must be a positive number of seconds, got {pair_s}")
    if not overhead_s >= 0.0:
        raise ValueError(f"overhead_s must be >= 0, got {overhead_s}")
    if not target > 0.0:
        raise ValueError(f"target must be > 0, got {target}")
    a = as_array(baseline, name="baseline")
    b = as_array(candidate, name="candidate")
    if a.size != b.size:
        raise ValueError(f"pairs need as many baseline as candidate values, got {a.size} and {b.size}")
    if np.any(a <= 0.0) or np.any(b <= 0.0):
        raise ValueError("values must be > 0 (the noise is taken on log ratios)")
    n = int(a.size)
    d = np.log(b) - np.log(a)
    sd = float(np.std(d, ddof=1)) if n >= 2 else math.nan
    level = (1.0 - confidence) / family
    strict = 1.0 - level

    def mde(pairs: int) -> float:
        return min_detectable_effect_paired(sd, pairs, confidence=strict, power=power)

    counts = [max(0, math.floor((t - overhead_s) / pair_s)) for t in budgets_s]
    projections = tuple(Projection(t, k, mde(k)) for t, k in zip(budgets_s, counts, strict=True))
    need = 0 if math.isnan(sd) else required_pairs(sd, target, confidence=strict, power=power)
    return NoiseBudget(
        n_pairs=n,
        pair_sd=sd,
        pair_sd_ci=_sd_interval(sd, n, confidence),
        trial_cv=_pooled_cv(a, b),
        pair_s=pair_s,
        level=level,
        mde=mde(n),
        projections=projections,
        target=target,
        target_pairs=need,
        target_s=need * pair_s + overhead_s if need else math.nan,
    )


def _sd_interval(sd: float, n: int, confidence: float) -> tuple[float, float]:
    """The chi-square interval of a normal sample's SD from n values (NaN below 2)."""
    if n < 2 or math.isnan(sd):
        return (math.nan, math.nan)
    df = n - 1
    tail = (1.0 - confidence) / 2.0
    hi_q, lo_q = float(sps.chi2.ppf(1.0 - tail, df)), float(sps.chi2.ppf(tail, df))
    return (sd * math.sqrt(df / hi_q), sd * math.sqrt(df / lo_q))


def _pooled_cv(a: np.ndarray, b: np.ndarray) -> float:
    """The CV of one trial: each label's deviations from its own mean, pooled, over the pooled mean."""
    if a.size < 2:
        return math.nan
    dev = np.concatenate([a - a.mean(), b - b.mean()])
    return float(math.sqrt(float(np.sum(dev**2)) / (dev.size - 2)) / np.mean(np.concatenate([a, b])))
