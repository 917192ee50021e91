"""When a paired comparison is precise enough to stop measuring (`tunbench run --target-mde 3% --budget 2m`).

"Narrow enough" is defined on the comparisons `compare` will gate: for each (case, metric) of the two labels,
the within-pair log ratios ``d_k = ln(b_k / a_k)`` give the paired MDE ``(t_{1 - level/2} + t_{power}) * s_d
/ sqrt(n)`` at df = n - 1 (``min_detectable_effect_paired``), at ``level = alpha / family``, Holm's first
(strictest) level over the ``family`` gated comparisons: exactly compare's MDE column. The target is
reached when the *largest* of them is at most the target, so every gated comparison can then detect a change
of the target's size with 80% power.

The rule reads only the spread of the ``d_k`` and their count, never their mean, a p-value or a verdict: it
stops on the width of the interval, not on significance. Stopping when a test happens to be significant would
make the p-values invalid (optional stopping: peeking until p < alpha inflates the false-positive rate far
above alpha); stopping on the spread leaves the location estimate and the test essentially as they are (the
SD of a few pairs is itself noisy, so a run that stops early has, on average, slightly underestimated its
spread; below the rank test's floor the MDE is infinite, so no run stops before the test can decide at all).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tunbench.stats.compare import DEFAULT_POWER
from tunbench.stats.paired import min_detectable_effect_paired, required_pairs


@dataclass(frozen=True)
class Precision:
    """Where a paired comparison stands. ``mde``: the largest MDE over the family (inf while the rank test
    cannot reach the level, NaN when undefined or nothing to compare), ``worst``: its comparison's name,
    ``n_pairs``: the fewest pairs among the comparisons, ``need_pairs``: the pairs the worst comparison needs
    for the target at its current spread (0 when undefined), ``family``: the gated comparisons."""

    mde: float
    worst: str
    n_pairs: int
    need_pairs: int
    family: int
    level: float
    target: float

    @property
    def reached(self) -> bool:
        return math.isfinite(self.mde) and self.mde <= self.target

    @property
    def more_pairs(self) -> int:
        """About how many more pairs the target needs at the current spread (0: reached or unknown)."""
        return max(0, self.need_pairs - self.n_pairs) if not self.reached else 0


def paired_precision(
    pairs: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    target: float,
    alpha: float = 0.05,
    power: float = DEFAULT_POWER,
) -> Precision:
    """The precision of a family of paired comparisons: name -> (A's values, B's values), partners at the same
    index, values > 0 (throughput, CPU per bit). A comparison with a value <= 0 counts as undefined."""
    if not target > 0.0:
        raise ValueError(f"target must be > 0, got {target}")
    family = max(1, len(pairs))
    level = alpha / family
    strict = 1.0 - level
    worst, worst_mde, fewest, need = "", math.nan, 0, 0
    mdes: list[tuple[float, str, int, float]] = []
    for name, (va, vb) in pairs.items():
        a, b = np.asarray(va, dtype=float), np.asarray(vb, dtype=float)
        n = int(min(a.size, b.size))
        if n < 2 or np.any(a[:n] <= 0.0) or np.any(b[:n] <= 0.0):
            mdes.append((math.nan, name, n, math.nan))
            continue
        sd = float(np.std(np.log(b[:n]) - np.log(a[:n]), ddof=1))
        mdes.append((min_detectable_effect_paired(sd, n, confidence=strict, power=power), name, n, sd))
    if mdes:
        fewest = min(n for _, _, n, _ in mdes)
        undefined = [m for m in mdes if math.isnan(m[0])]
        if undefined:
            worst, worst_mde = undefined[0][1], math.nan
        else:
            worst_mde, worst, _, _ = max(mdes, key=lambda m: m[0])
        sds = [sd for _, _, _, sd in mdes if math.isfinite(sd)]
        if sds and not undefined:
            need = required_pairs(max(sds), target, confidence=strict, power=power)
    return Precision(
        mde=worst_mde, worst=worst, n_pairs=fewest, need_pairs=need, family=family, level=level, target=target
    )


def fmt_mde(x: float) -> str:
    return "–" if math.isnan(x) else "∞" if math.isinf(x) else f"±{x:.1%}"
