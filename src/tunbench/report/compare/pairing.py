"""Which trials are compared with which: cases matched between A and B (by label mapping and the other
axes), trials paired by repetition within one run, warm windows folded into one unit per bring-up (pure).
"""

from __future__ import annotations

import math
from collections import defaultdict

from tunbench.report.compare.metrics import Metric
from tunbench.report.compare.result import CompareError
from tunbench.report.summary import (
    unit_mean,
    unit_values,
)
from tunbench.results import CaseKey, TrialRecord


def by_case(trials: list[TrialRecord]) -> dict[CaseKey, list[TrialRecord]]:
    out: dict[CaseKey, list[TrialRecord]] = defaultdict(list)
    for t in trials:
        out[t.case].append(t)
    return out


def _rest(case: CaseKey) -> tuple[str, str, int, str, int, str, int]:
    return (case.profile, case.workload, case.flows, case.direction, case.clients, case.variant, case.cores)


def metric_units(trials: list[TrialRecord], metric: Metric) -> list[float]:
    """The metric's ok values, one per independent unit (``report.summary.unit_values``: a cold trial, or a
    warm bring-up's windows' mean, as pair_values takes them)."""
    return unit_values(trials, metric.value)


def _by_repetition(trials: list[TrialRecord]) -> dict[int, TrialRecord]:
    """The ok trial of each repetition (the last one by seq if a repetition has several)."""
    out: dict[int, TrialRecord] = {}
    for t in sorted(trials, key=lambda t: t.seq):
        if t.status == "ok":
            out[t.repetition] = t
    return out


def pair_trials(ta: list[TrialRecord], tb: list[TrialRecord]) -> tuple[list[tuple[TrialRecord, TrialRecord]], int]:
    """A's and B's ok trials of one case matched by repetition, and how many repetitions were dropped
    because only one side has an ok trial (the partner failed or is missing)."""
    ra, rb = _by_repetition(ta), _by_repetition(tb)
    pairs = [(ra[k], rb[k]) for k in sorted(ra.keys() & rb.keys())]
    return pairs, len(ra.keys() ^ rb.keys())


def pair_values(pairs: list[tuple[TrialRecord, TrialRecord]], metric: Metric) -> tuple[list[float], list[float]]:
    """The metric's values of both partners (A's, B's), for the pairs where both have a finite one. Warm
    windows (`--warm`) are not independent pairs: the windows of one bring-up share that bring-up's luck (how
    the tunnel's threads were placed, its state), so the pairs of one pair of bring-ups are one unit, each
    side its windows' mean (geometric, so the unit's log ratio is the mean of the windows' log ratios;
    arithmetic where a value is <= 0). Cold trials are each their own unit."""
    units: dict[object, tuple[list[float], list[float]]] = {}
    for x, y in pairs:
        a, b = metric.value(x), metric.value(y)
        if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
            continue
        key = bringup_unit(x, y)
        va, vb = units.setdefault(key if key is not None else ("pair", x.seq), ([], []))
        va.append(float(a))
        vb.append(float(b))
    return [unit_mean(va) for va, _ in units.values()], [unit_mean(vb) for _, vb in units.values()]


def bringup_unit(x: TrialRecord, y: TrialRecord) -> tuple[str, str] | None:
    """The pair of warm bring-ups two partners were measured on, or None for cold trials."""
    wx, wy = x.params.get("warm"), y.params.get("warm")
    if not (isinstance(wx, dict) and isinstance(wy, dict)):
        return None
    return str(wx.get("bringup")), str(wy.get("bringup"))


def match_cases(
    a: dict[CaseKey, list[TrialRecord]],
    b: dict[CaseKey, list[TrialRecord]],
    label_a: str | None,
    label_b: str | None,
) -> list[tuple[CaseKey, CaseKey]]:
    if label_a is None and label_b is None:
        return [(k, k) for k in a if k in b]
    la = label_a if label_a is not None else label_b
    lb = label_b if label_b is not None else label_a
    for side, label, cases in (("A", la, a), ("B", lb, b)):
        if not any(k.label == label for k in cases):
            have = ", ".join(sorted({k.label for k in cases})) or "none"
            raise CompareError(f"no trials labelled {label!r} in {side} (labels there: {have})")
    b_by_rest = {_rest(k): k for k in b if k.label == lb}
    return [(k, b_by_rest[_rest(k)]) for k in a if k.label == la and _rest(k) in b_by_rest]
