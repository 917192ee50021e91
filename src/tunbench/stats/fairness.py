"""Jain's fairness index over concurrent flows' throughputs."""

from __future__ import annotations

import numpy as np

from tunbench.stats._common import Values, as_array


def jain_index(xs: Values) -> float:
    """Jain's fairness index J = (sum x)^2 / (n * sum x^2), in [1/n, 1].

    1.0 means every flow got the same share; 1/n means one flow got everything.

    Edge cases (chosen so that a failed measurement is never reported as "perfectly fair"):
    * empty input -> NaN;
    * all values 0 -> NaN (0/0: nothing was allocated, fairness is undefined);
    * a single positive value -> 1.0;
    * negative values -> ``ValueError`` (allocations are non-negative); NaN/inf -> ``ValueError``.
    """
    x = as_array(xs, name="xs")
    if np.any(x < 0.0):
        raise ValueError("jain_index: allocations must be non-negative")
    sum_sq = float(np.sum(x * x))
    if x.size == 0 or sum_sq == 0.0:
        return float("nan")
    total = float(np.sum(x))
    # Clip guards against rounding pushing the result a hair above 1.0.
    return min(1.0, total * total / (x.size * sum_sq))
