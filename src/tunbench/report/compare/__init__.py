"""`tunbench compare`: A/B verdicts per matching case and metric, usable as a CI gate.

A and B are runs (store id, uid or name, or a JSON export file), or two labels within one run
(``--label-a old --label-b new``, e.g. ``socat[label=old]`` vs ``socat[bin=/opt/new/socat,label=new]``).
A is the baseline, B the candidate: a change of -8 % means B's median is 8 % below A's.

Cases match on (label, profile, workload, flows, direction, clients, variant, cores); with ``--label-a``/``--label-b``
the label of A's cases is mapped to B's label and the rest must match. For each matching case and metric the
verdict comes from ``tunbench.stats.compare`` (rank test, distribution-free CI of the change with its
exact coverage, threshold, MDE).

Relative and absolute metrics. The catalogue (``metrics_for``) marks signed metrics ``absolute``
(``ABSOLUTE``: the latency increase under load, loaded minus idle, which is often negative);
they are compared as median(B) - median(A) in their unit ("+7.0 ms [+5.1, +8.8]"). Any other metric
falls back to absolute for a case whenever a value on either side is <= 0: a change is never taken
relative to a median <= 0 (from -2 ms to +5 ms is not "-350 %", and 0 +- noise is not "+200 %").

Thresholds. ``--threshold`` is relative (3 % = 0.03) and applies to relative comparisons only; it cannot
apply to a difference of signed values. Absolute comparisons take a threshold in their unit,
``threshold_abs`` per unit; the CLI offers ``--threshold-ms`` (the unit of every absolute metric in the
catalogue); an absolute comparison in another unit (throughput with a 0 value, say) has threshold 0.

Multiple comparisons. The comparisons that can fail the gate (all but the direct baseline's, counted
work's) are Holm-adjusted per tier of the gate (``tunbench.stats.multiple``: family-wise error <= alpha per
family, the property a pass/fail gate needs). The default ``cost`` gate (``gate``) holds CPU per bit and
latency at the threshold in one family and throughput at a wider threshold in a family of its own;
``Gate("all")`` holds every metric at the threshold in one family. The direct rows are a family of their
own. Verdicts use the adjusted p-value.

Paired or unpaired. When A and B are two labels of ONE run, the trials of a case under the two labels with
the same repetition number ran in the same repetition round (seconds apart): they are pairs, and the
comparison is paired (``tunbench.stats.compare_paired``: the paired t on the within-pair log ratios, or on
the differences for absolute metrics: their mean, its t interval and the t-test; MDE from their SD). Pairs are
the ok trials of both labels with the same repetition; a repetition whose partner failed (or is missing) is
dropped, and a note says how many. A case (or metric) with fewer than ``MIN_PAIRS`` (3) pairs falls back to
the unpaired analysis, and a note says so. Two different runs are always compared unpaired (Mann-Whitney,
``tunbench.stats.compare``): their trials are not pairs. ``CompareResult.analysis`` says which was used and
why, and the table's caption prints it.

Interfered trials (the monitor's ``interfered`` metric: another tunbench run, foreign CPU or steal in the
window) are left out by default, in a paired design with their pairs' partners, and a note says how many
and why (``report.summary.leave_out_interfered``; ``include_interfered`` keeps them).

How many repetitions can give a verdict at all is one rule, ``stats.min_repetitions``: compare's notes, the
power warnings, ``repetition_note`` (`run --dry-run` and the run's header) and ``min_repetitions_text`` (the
sentence the help and the docs carry) all come from it.

Cases of the ``direct`` baseline are compared and shown but never gate: a change there measures the
host, not the tunnel (it is a reason to distrust the other verdicts, and a warning says so).

Only ``load_run`` does I/O; everything else is pure. The package, one concern per module: ``metrics`` (what is
judged), ``gate`` (which comparisons gate, at which threshold),
``load`` (A and B in), ``pairing`` (which trials face which), ``verdicts`` (compare_runs, Holm),
``repetitions`` (the one rule on how many), ``settings`` (differing network settings), ``format`` (the table and
lines), ``result`` (the types). This module re-exports what the rest of tunbench imports.
"""

from __future__ import annotations

from tunbench.report.compare.format import (
    caption,
    compare_lines,
    compare_table,
    fmt_change,
    fmt_ci,
    fmt_coverage,
    fmt_mde,
    fmt_p,
    n_text,
    threshold_text,
    verdict_line,
)
from tunbench.report.compare.gate import DEFAULT_WIDE, GATE_NAMES, Gate, parse_gate
from tunbench.report.compare.load import load_run, run_name
from tunbench.report.compare.metrics import (
    ABSOLUTE,
    CPU_CARRIED,
    CPU_DELIVERED,
    CPU_TOTAL,
    METRIC_KINDS,
    OVERHEAD,
    THROUGHPUT,
    WORK_RATIOS,
    Metric,
    metrics_for,
)
from tunbench.report.compare.pairing import bringup_unit, pair_trials, pair_values
from tunbench.report.compare.repetitions import GATED_PER_CASE, min_repetitions_text, repetition_note
from tunbench.report.compare.result import (
    EXIT_REGRESSED,
    OUTCOMES,
    CaseComparison,
    CompareError,
    CompareResult,
    Outcome,
)
from tunbench.report.compare.settings import flatten, settings_differences
from tunbench.report.compare.verdicts import compare_runs, unplaced_note
from tunbench.report.exporters.json import run_from_export

__all__ = [
    "ABSOLUTE",
    "CPU_CARRIED",
    "CPU_DELIVERED",
    "CPU_TOTAL",
    "DEFAULT_WIDE",
    "EXIT_REGRESSED",
    "GATED_PER_CASE",
    "GATE_NAMES",
    "METRIC_KINDS",
    "OUTCOMES",
    "OVERHEAD",
    "THROUGHPUT",
    "WORK_RATIOS",
    "CaseComparison",
    "CompareError",
    "CompareResult",
    "Gate",
    "Metric",
    "Outcome",
    "bringup_unit",
    "caption",
    "compare_lines",
    "compare_runs",
    "compare_table",
    "flatten",
    "fmt_change",
    "fmt_ci",
    "fmt_coverage",
    "fmt_mde",
    "fmt_p",
    "load_run",
    "metrics_for",
    "min_repetitions_text",
    "n_text",
    "pair_trials",
    "pair_values",
    "parse_gate",
    "repetition_note",
    "run_from_export",
    "run_name",
    "settings_differences",
    "threshold_text",
    "unplaced_note",
    "verdict_line",
]
