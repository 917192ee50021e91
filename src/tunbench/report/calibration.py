"""What `tunbench calibrate` says about a stored A/A run (pure): the noise per metric and the MDE per budget
as the gate would judge them (the statistics: tunbench.stats.calibrate), the record kept with the run, the
table and the lines it prints.

The A/A is the tunnel twice, as labels `a` and `b` of one run in paired blocks; a metric is calibrated when it
has at least `MIN_PAIRS` pairs of values above 0.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from tunbench.units import minutes

if TYPE_CHECKING:
    from tunbench.report.compare import Gate, Metric
    from tunbench.results import RunRecord
    from tunbench.stats import NoiseBudget

LABELS = ("a", "b")
MIN_PAIRS = 2  # the fewest pairs that give a spread at all

ASSUMPTION = (
    "assumption: the projected MDEs fall as about 1/sqrt(pairs) because they take the within-pair noise "
    "measured here as the noise of any longer run on this host (same load, pairs independent, same trials "
    "and set-up per pair); the pair sd is itself an estimate (its CI), and so are they"
)


def noise_per_metric(
    run_rec: RunRecord,
    *,
    pair_s: float,
    overhead_s: float,
    target: float,
    include_interfered: bool = False,
    gate: Gate | None = None,
) -> list[tuple[Metric, NoiseBudget]]:
    """Per metric with at least 2 pairs of values > 0: its noise and MDE per budget, as `compare` of the same
    run would gate it (``report.compare.gate``): at Holm's level over the metrics of its tier, against the
    tier's target (the wide tier's: ``wide`` x `target`). Main-tier metrics come first. Pairs with an
    interfered trial are left out (``report.summary.leave_out_interfered``) unless `include_interfered`."""
    from tunbench.report.compare import Gate, metrics_for, pair_trials, pair_values
    from tunbench.report.compare.gate import MAIN_CPU, main_metric
    from tunbench.report.compare.verdicts import work_gate_keeps
    from tunbench.report.summary import leave_out_interfered
    from tunbench.stats import noise_budget

    gate = gate or Gate()
    include_interfered = include_interfered or work_gate_keeps(gate, run_rec.trials)
    trials, _ = leave_out_interfered(run_rec.trials, paired=True, include=include_interfered)
    a = [t for t in trials if t.label == LABELS[0]]
    b = [t for t in trials if t.label == LABELS[1]]
    trial_pairs, _ = pair_trials(a, b)
    values = []
    for metric in metrics_for(run_rec.trials, ("throughput", "cpu")):
        va, vb = pair_values(trial_pairs, metric)
        if len(va) >= MIN_PAIRS and min(va + vb) > 0.0:
            values.append((metric, va, vb))
    main = main_metric([m.name for m, _, _ in values if m.name in MAIN_CPU])
    tiers = {m.name: tier for m, _, _ in values if (tier := gate.tier(m, main=main))}  # "": shown, not gated
    values = [v for v in values if v[0].name in tiers]
    family = {t: sum(1 for x in tiers.values() if x == t) for t in set(tiers.values())}
    values.sort(key=lambda v: tiers[v[0].name] == "wide")
    out = []
    for m, va, vb in values:
        tier = tiers[m.name]
        nb = noise_budget(
            va, vb, pair_s, overhead_s=overhead_s, family=family[tier], target=gate.threshold(tier, target)
        )
        out.append((m, nb))
    return out


def calibration_record(noise: list[tuple[Metric, NoiseBudget]], gate: Gate) -> dict[str, object]:
    """What calibrate records with its run (provenance ``calibration``): the gate it calibrated, and per metric
    its pairs, pair SD with CI, level, MDE now, target with the pairs and seconds that reach it, and the MDE
    per budget."""
    first = noise[0][1]
    return {
        "gate": gate.name,
        "wide": gate.wide,
        "pair_s": first.pair_s,
        "metrics": {
            m.name: {
                "title": m.title,
                "pairs": nb.n_pairs,
                "pair_sd": _finite(nb.pair_sd),
                "pair_sd_ci": [_finite(x) for x in nb.pair_sd_ci],
                "trial_cv": _finite(nb.trial_cv),
                "level": nb.level,
                "mde": _finite(nb.mde),
                "target": nb.target,
                "target_pairs": nb.target_pairs,
                "target_s": _finite(nb.target_s),
                "mde_per_budget_s": {f"{p.budget_s:g}": _finite(p.mde) for p in nb.projections},
            }
            for m, nb in noise
        },
    }


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _mde(x: float) -> str:
    return "–" if math.isnan(x) else "∞" if math.isinf(x) else f"±{x:.1%}"


def _pct(x: float) -> str:
    return "–" if math.isnan(x) else f"{x:.1%}"


def _budget(s: float) -> str:
    return f"{s / 60:g} min" if s >= 60 and (s / 60).is_integer() else minutes(s)


def calibration_table(noise: list[tuple[Metric, NoiseBudget]]) -> Table:
    """One row per metric: its gate, trial CV, pair SD with CI, MDE now and at each budget, and what reaches
    its target."""
    first = noise[0][1]
    table = Table(
        title=f"noise and MDE per budget (paired, {first.n_pairs} pairs measured, {first.pair_s:.1f} s per pair)",
        header_style="bold",
        caption="trial CV: one trial's spread (both labels); pair sd: SD of ln(b/a) over the pairs [95% CI]; "
        "gate: the metric's target and level in the gate (alpha 0.05, Holm over its tier); MDE: the change a "
        "paired comparison detects with 80% power at that level; (n): the pairs a budget buys",
        caption_justify="left",
    )
    table.add_column("metric")
    table.add_column("gate", justify="right")
    table.add_column("trial CV", justify="right")
    table.add_column("pair sd [CI]", justify="right")
    table.add_column("MDE now", justify="right")
    for p in first.projections:
        table.add_column(_budget(p.budget_s), justify="right")
    table.add_column("for its target", justify="right")
    for metric, nb in noise:
        lo, hi = nb.pair_sd_ci
        need = f"{nb.target_pairs} pairs, {minutes(nb.target_s)}" if nb.target_pairs else "–"
        table.add_row(
            metric.title,
            f"±{nb.target:.1%} · {nb.level:.2g}",
            _pct(nb.trial_cv),
            f"{_pct(nb.pair_sd)} [{_pct(lo)}, {_pct(hi)}]".replace("[–, –]", "").strip(),
            _mde(nb.mde),
            *(f"{_mde(p.mde)} ({p.pairs})" for p in nb.projections),
            need,
        )
    return table


def calibration_lines(
    run_rec: RunRecord,
    *,
    pair_s: float,
    overhead_s: float,
    target: float,
    include_interfered: bool = False,
    gate: Gate | None = None,
    noise: list[tuple[Metric, NoiseBudget]] | None = None,
) -> list[object]:
    """What calibrate prints after its run: what it measured, the interfered pairs it left out, the table (or
    why there is none), the assumption, and compare's verdict on the A/A."""
    from tunbench.report.compare import CompareError, Gate, compare_runs, verdict_line
    from tunbench.report.compare.verdicts import work_gate_keeps
    from tunbench.report.summary import leave_out_interfered
    from tunbench.workloads import case_title as case_text

    if noise is None:  # the caller's, when it has them (calibrate records them too)
        noise = noise_per_metric(
            run_rec, pair_s=pair_s, overhead_s=overhead_s, target=target, include_interfered=include_interfered,
            gate=gate,
        )  # fmt: skip
    keep = include_interfered or work_gate_keeps(gate or Gate(), run_rec.trials)  # as the noise above
    _, left = leave_out_interfered(run_rec.trials, paired=True, include=keep)
    cases = sorted({f"{t.tunnel} · " + case_text(t.case).removeprefix(f"{t.label} · ") for t in run_rec.trials})
    pairs = max((nb.n_pairs for _, nb in noise), default=0)
    warm = any("warm" in t.params for t in run_rec.trials)
    head = (
        f"calibration: A/A of {escape(', '.join(cases))} as labels a and b, {pairs} ok pair(s)"
        + (" of warm bring-ups (each its windows' mean)" if warm else "")
        + f"; {pair_s:.1f} s per pair, {overhead_s:.0f} s per run besides"
    )
    if left:
        head += f"\n[yellow]{escape(left.text)}[/]"
    if not noise:
        return [
            head,
            f"[red]no metric has {MIN_PAIRS} pairs of ok trials: nothing to calibrate (see the errors above)[/]",
        ]
    out: list[object] = [head, calibration_table(noise), f"[dim]{ASSUMPTION}[/]"]
    try:
        res = compare_runs(
            run_rec, run_rec, label_a=LABELS[0], label_b=LABELS[1], kinds=("throughput", "cpu"),
            include_interfered=include_interfered, gate=gate, threshold=target,
        )  # fmt: skip
    except CompareError as e:
        return [*out, f"[yellow]A/A check: not compared ({escape(str(e))})[/]"]
    out.append("A/A check (the same tunnel on both sides; a regressed or improved comparison here is a false one):")
    out.append(f"[dim]{escape(res.gate_line())}[/]")
    out.append(verdict_line(res))
    return out
