"""Outlier detection by the modified z-score (Iglewicz & Hoaglin), as in hyperfine."""

from __future__ import annotations

import numpy as np

from tunbench.stats._common import FloatArray, Values, as_array

# 0.6745 = Phi^-1(0.75): makes MAD a consistent estimator of the standard deviation for normal data.
_MAD_SCALE = 0.6745
# Fallback when MAD == 0 (more than half the values identical): mean absolute deviation scaled by
# sqrt(pi/2) = 1.253314, the constant that makes it consistent for normal data.
_MEANAD_SCALE = 1.253314


def modified_z_scores(values: Values) -> FloatArray:
    """Modified z-scores M_i = 0.6745 * (x_i - median) / MAD.

    If MAD is 0, uses (x_i - median) / (1.253314 * MeanAD) instead; if that is 0 too (all values
    equal), every score is 0. Empty input gives an empty array.
    """
    x = as_array(values)
    if x.size == 0:
        return np.zeros(0, dtype=np.float64)
    dev = x - np.median(x)
    mad = float(np.median(np.abs(dev)))
    if mad > 0.0:
        return np.asarray(_MAD_SCALE * dev / mad, dtype=np.float64)
    mean_ad = float(np.mean(np.abs(dev)))
    if mean_ad > 0.0:
        return np.asarray(dev / (_MEANAD_SCALE * mean_ad), dtype=np.float64)
    return np.zeros(x.size, dtype=np.float64)


def outliers(values: Values, threshold: float = 3.5) -> list[int]:
    """Indices of values whose |modified z-score| exceeds ``threshold`` (3.5 is the usual cut-off).

    Fewer than 3 values never yield outliers (there is no majority to compare against).
    """
    if threshold <= 0.0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    z = modified_z_scores(values)
    if z.size < 3:
        return []
    return [int(i) for i in np.flatnonzero(np.abs(z) > threshold)]
