"""bencher.dev Bencher Metric Format (BMF) JSON, for `bencher run --adapter json --file FILE`.

Shape (https://bencher.dev/docs/reference/bencher-metric-format/, JSON schema https://bencher.dev/bmf.json):

    {"<benchmark name>": {"<measure>": {"value": <number>, "lower_value": <number>, "upper_value": <number>}}}

``value`` is required, ``lower_value``/``upper_value`` optional; a measure is identified by its slug or name
(max 64 characters), a benchmark by its name (max 1024 characters). JSON has no NaN, so measures without a
value are left out and bounds only given when finite.

Benchmarks are cases: ``<label>/<profile>/<workload>/<direction>/<flows>-flow[s]`` (prefixed with the run's
uid when several runs are exported together). Measures (units in the slug):

* ``throughput-bps``: median, with the 95 % CI of the median as lower/upper (higher is better)
* ``ratio-to-direct``: median ratio to the direct path, with its bootstrap CI
* ``cpu-pct-client`` / ``cpu-pct-server``: median CPU % of one core (lower is better)
* ``bits-per-cpu-second-client`` / ``-server``: throughput per CPU-second (higher is better)
* ``latency-<pNN>-ms``: median over repetitions of each ``latency.<pNN>_ms`` metric, min/max as bounds
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence

from tunbench.metrics.latency import time_of
from tunbench.report.common import count_of, flows_text, mode_of
from tunbench.report.summary import CaseSummary, summarize_trials
from tunbench.results import CaseKey, RunRecord, TrialRecord

Measure = dict[str, float]


def benchmark_name(case: CaseKey) -> str:
    # a multi-client case keeps the name it had when flows held its client count and direction its variant
    count = flows_text(count_of(case)).replace(" ", "-")
    return f"{case.label}/{case.profile}/{case.workload}/{mode_of(case)}/{count}"


def _measure(value: float | None, low: float | None = None, high: float | None = None) -> Measure | None:
    if value is None or not math.isfinite(value):
        return None
    out = {"value": float(value)}
    if low is not None and high is not None and math.isfinite(low) and math.isfinite(high):
        out["lower_value"], out["upper_value"] = float(low), float(high)
    return out


def _latency(trials: list[TrialRecord]) -> dict[str, Measure]:
    per: dict[str, list[float]] = defaultdict(list)
    for t in trials:
        if t.status != "ok":
            continue
        for k, v in t.metrics.items():
            if time_of(k) is not None and v is not None and math.isfinite(v):
                per[k].append(v)
    out: dict[str, Measure] = {}
    for k, vs in sorted(per.items()):
        vs.sort()
        mid = vs[len(vs) // 2] if len(vs) % 2 else (vs[len(vs) // 2 - 1] + vs[len(vs) // 2]) / 2
        slug = "latency-" + k.split(".", 1)[1].removesuffix("_ms").replace("_", "-").replace(".", "-") + "-ms"
        m = _measure(mid, vs[0], vs[-1])
        if m:
            out[slug[:64]] = m
    return out


def case_measures(s: CaseSummary, trials: list[TrialRecord]) -> dict[str, Measure]:
    t, r = s.throughput, s.ratio_to_direct
    candidates: dict[str, Measure | None] = {
        "throughput-bps": _measure(t.median, t.ci_low, t.ci_high) if s.n else None,
        "ratio-to-direct": _measure(r.value, r.ci_low, r.ci_high) if r is not None else None,
    }
    for role, f in s.roles.items():
        candidates[f"cpu-pct-{role}"] = _measure(f.cpu_pct)
        candidates[f"bits-per-cpu-second-{role}"] = _measure(f.bits_per_cpu_s)
    out = {k: v for k, v in candidates.items() if v is not None}
    out.update(_latency(trials))
    return out


def export(runs: list[RunRecord]) -> dict[str, dict[str, Measure]]:
    out: dict[str, dict[str, Measure]] = {}
    for run in runs:
        prefix = f"{run.uid}/" if len(runs) > 1 else ""
        by_case: dict[CaseKey, list[TrialRecord]] = defaultdict(list)
        for tr in run.trials:
            by_case[tr.case].append(tr)
        for s in summarize_trials(run.trials):
            measures = case_measures(s, by_case[s.case])
            if measures:
                out[prefix + benchmark_name(s.case)] = measures
    return out


def render(runs: list[RunRecord]) -> str:
    return json.dumps(export(runs), indent=2, allow_nan=False) + "\n"


class BmfExporter:
    """`--format bmf` only: BMF is JSON too, so no file suffix selects it (`.json` is the run's own export)."""

    name = "bmf"
    suffixes: tuple[str, ...] = ()

    def render(self, runs: Sequence[RunRecord]) -> str:
        return render(list(runs))
