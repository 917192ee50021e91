"""Statistics for tunbench: pure functions, sequences in, frozen dataclasses out, no I/O.

* ``summarize`` / ``Summary``: median, mean, spread and a CI of the median per case.
* ``ratio_of_medians`` / ``Ratio``: e.g. tunnel throughput relative to direct, with a distribution-free
  CI and its real coverage.
* ``compare`` / ``Comparison``: relative (or, for signed data, absolute) change, rank test, verdict and
  regression gate; ``adjust``: Holm's multiple-comparison adjustment of a family of comparisons.
* ``compare_paired``: the same verdict from pairs (two labels of one run, same repetition): the paired t on
  the within-pair log ratios, its mean and t interval (``tunbench.stats.paired.paired_t``).
* ``min_repetitions``: the one rule for the fewest repetitions with which a gated family can give a verdict.
* ``shift_interval`` / ``ratio_interval``: the Hodges-Lehmann / Mann-Whitney CI behind both;
  ``holm``: Holm-adjusted p-values.
* ``noise_budget`` / ``NoiseBudget``: an A/A calibration's noise and the MDE to expect per budget
  (``tunbench.stats.calibrate``).
* ``paired_precision`` / ``Precision``: whether a paired comparison's MDE has reached a target (the stop
  rule of ``run --target-mde``; ``tunbench.stats.precision``).
* ``jain_index``: fairness across concurrent flows.
* ``stability_warnings`` / ``StabilityWarning``, ``outliers``: reasons not to trust a number.
"""

from tunbench.stats.calibrate import NoiseBudget, Projection, noise_budget
from tunbench.stats.checks import (
    StabilityWarning,
    WarningCode,
    common_limit_warning,
    link_warnings,
    stability_warnings,
    steal_warnings,
)
from tunbench.stats.compare import (
    Analysis,
    Comparison,
    Verdict,
    adjust,
    compare,
    compare_paired,
    min_attainable_p,
    min_detectable_effect,
    min_repetitions,
    paired_p_floor,
    required_repetitions,
)
from tunbench.stats.fairness import jain_index
from tunbench.stats.multiple import holm
from tunbench.stats.outliers import modified_z_scores, outliers
from tunbench.stats.paired import (
    MIN_PAIRS,
    hodges_lehmann,
    min_attainable_p_paired,
    min_detectable_effect_paired,
    paired_interval,
    paired_t,
    required_pairs,
    signed_rank_p,
)
from tunbench.stats.precision import Precision, paired_precision
from tunbench.stats.shift import ShiftInterval, ratio_interval, shift_interval
from tunbench.stats.summary import (
    CIMethod,
    Ratio,
    Summary,
    order_statistic_interval,
    percentile,
    ratio_of_medians,
    summarize,
)

__all__ = [
    "MIN_PAIRS",
    "Analysis",
    "CIMethod",
    "Comparison",
    "NoiseBudget",
    "Precision",
    "Projection",
    "Ratio",
    "ShiftInterval",
    "StabilityWarning",
    "Summary",
    "Verdict",
    "WarningCode",
    "adjust",
    "common_limit_warning",
    "compare",
    "compare_paired",
    "hodges_lehmann",
    "holm",
    "jain_index",
    "link_warnings",
    "min_attainable_p",
    "min_attainable_p_paired",
    "min_detectable_effect",
    "min_detectable_effect_paired",
    "min_repetitions",
    "modified_z_scores",
    "noise_budget",
    "order_statistic_interval",
    "outliers",
    "paired_interval",
    "paired_p_floor",
    "paired_precision",
    "paired_t",
    "percentile",
    "ratio_interval",
    "ratio_of_medians",
    "required_pairs",
    "required_repetitions",
    "shift_interval",
    "signed_rank_p",
    "stability_warnings",
    "steal_warnings",
    "summarize",
]
