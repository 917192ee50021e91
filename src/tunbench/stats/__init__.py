"""Statistics for tunbench: pure functions, sequences in, frozen dataclasses out, no I/O.

* ``summarize`` / ``Summary``: median, mean, spread and a CI of the median per case.
* ``ratio_of_medians`` / ``Ratio``: e.g. tunnel throughput relative to direct, with a bootstrap CI.
* ``compare`` / ``Comparison``: relative change, rank test, verdict and regression gate.
* ``jain_index``: fairness across concurrent flows.
* ``stability_warnings`` / ``StabilityWarning``, ``outliers``: reasons not to trust a number.
"""

from tunbench.stats.checks import StabilityWarning, WarningCode, link_warnings, stability_warnings
from tunbench.stats.compare import (
    Comparison,
    Verdict,
    compare,
    min_attainable_p,
    min_detectable_effect,
    required_repetitions,
)
from tunbench.stats.fairness import jain_index
from tunbench.stats.outliers import modified_z_scores, outliers
from tunbench.stats.summary import (
    CIMethod,
    Ratio,
    Summary,
    order_statistic_interval,
    ratio_of_medians,
    summarize,
)

__all__ = [
    "CIMethod",
    "Comparison",
    "Ratio",
    "StabilityWarning",
    "Summary",
    "Verdict",
    "WarningCode",
    "compare",
    "jain_index",
    "link_warnings",
    "min_attainable_p",
    "min_detectable_effect",
    "modified_z_scores",
    "order_statistic_interval",
    "outliers",
    "ratio_of_medians",
    "required_repetitions",
    "stability_warnings",
    "summarize",
]
