"""When a paired comparison is precise enough to stop measuring (`tunbench run --target-mde 3% --budget 2m`).

"Narrow enough" is defined on the comparisons `compare` will gate: for each (case, metric) of the two labels,
the within-pair log ratios ``d_k = ln(b_k / a_k)`` give the paired MDE ``(t_{1 - level/2} + t_{power}) * s_d
/ sqrt(n)`` at df = n - 1 (``min_detectable_effect_paired``), at ``level = alpha / family``, Holm's first
(strictest) level over the ``family`` gated comparisons: exactly compare's MDE column. The target is
reached when the *largest* of them is at most the target, so every gated comparison can then detect a change
of the target's size with 80% power.

The rule reads only the root mean square of the ``d_k`` (``rms``: not centred on their mean, on n - 1 degrees of
freedom, so never below compare's SD) and their count,
never their mean, their signs, a p-value or a verdict: it stops on the width of the interval, not on
significance. Stopping when a test happens to be significant would make the p-values invalid (optional
stopping). The centred SD was not enough either: under no change, a small SD means the pairs' signs agree, so a
rule on the SD stopped preferentially on runs that lean one way (issue 28: the false-positive rate of the paired
test rose to 6.6% at a target of 0.7 SD). The RMS does not change when any pair's partners are swapped, so the
stopping time is independent of the signs, which are all an A/A test looks at under a symmetric null; the
simulated level is in docs/precision.md (`scripts/stats_sims.py stop`) and a test checks it.
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
    others: int = 0,
) -> Precision:
    """The precision of a family of paired comparisons: name -> (A's values, B's values), partners at the same
    index, values > 0 (throughput, CPU per bit). A comparison with a value <= 0 counts as undefined.
    ``others``: the family's comparisons that count in Holm's level but have no relative MDE to reach the
    target with (an absolute latency difference, in ms), as compare counts them."""
    if not target > 0.0:
        raise ValueError(f"target must be > 0, got {target}")
    family = max(1, len(pairs) + max(0, others))
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
        sd = rms(np.log(b[:n]) - np.log(a[:n]))
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


def rms(d: np.ndarray) -> float:
    """The root mean square of the differences, NOT centred on their mean, on n - 1 degrees of freedom:
    sqrt(sum(d**2) / (n - 1)). It is blind to the sign of each d (swap any partners and it does not move), so
    stopping on it cannot select runs whose pairs happen to agree in sign, which the centred SD did (issue 28:
    the signed-rank test's level rose to 6.6% under that rule). It is never below the centred SD compare uses
    (sum(d**2) >= sum((d - mean)**2)), so when the rule says the target is reached, compare's MDE of the same
    pairs is at most the target too (with n in the denominator it was not: a run stopped "at the target" of
    ±3% and compare then gave ±3.1%). With no change it estimates the same variance as the SD; with a change
    it is larger, so a real change only makes the run measure longer."""
    n = d.size
    return float(np.sqrt(np.sum(np.square(d)) / (n - 1))) if n > 1 else math.nan


def fmt_mde(x: float) -> str:
    return "–" if math.isnan(x) else "∞" if math.isinf(x) else f"±{x:.1%}"
