"""Multiple comparisons: Holm's step-down adjustment of p-values.

Why Holm (and not Benjamini-Hochberg) for the compare gate
---------------------------------------------------------
``tunbench compare`` tests every case x metric, often 20-60 comparisons, and exits 1 if *any* of them
is significantly worse. What matters for a CI gate is the chance of failing a build that changed
nothing, i.e. of at least one false "worse": the family-wise error rate. Holm (1979) controls it at
alpha under any dependence between the tests (the metrics of one case are strongly dependent), and is
uniformly more powerful than Bonferroni. Benjamini-Hochberg controls the false discovery rate instead
(the expected *fraction* of false findings among the findings), which lets the chance of one false
alarm grow with the number of comparisons: right for screening, wrong for a pass/fail gate.

Hand-written: scipy only offers BH/BY (``scipy.stats.false_discovery_control``) and statsmodels (which
has Holm in ``multipletests``) would pull pandas and patsy into the tool for six lines of arithmetic.
The test checks it against values computed by hand and against R's ``p.adjust(method = "holm")``.
"""

from __future__ import annotations

import numpy as np

from tunbench.stats._common import FloatArray, Values


def holm(p_values: Values) -> FloatArray:
    """Holm-adjusted p-values, in the input order: reject H_i at level alpha iff adjusted_i < alpha.

    adjusted_(i) = max_{j <= i} min(1, (m - j + 1) * p_(j)) over the sorted p-values, m = the number of
    finite p-values. NaN p-values (a comparison that could not be made) stay NaN and do not count in m.
    """
    p = np.asarray(p_values, dtype=np.float64).ravel()
    out = np.full(p.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    if finite.size == 0:
        return out
    if np.any((p[finite] < 0.0) | (p[finite] > 1.0)):
        raise ValueError("p-values must be in [0, 1]")
    m = finite.size
    order = finite[np.argsort(p[finite], kind="stable")]
    scaled = (m - np.arange(m)) * p[order]
    out[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return out
