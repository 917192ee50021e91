"""compare_runs: every matched case and metric compared (paired or unpaired, see the package docstring),
the gate's family Holm-adjusted, and the notes that qualify the verdicts (pure).
"""

from __future__ import annotations

from dataclasses import replace

from tunbench.report.compare.format import fmt_change
from tunbench.report.compare.gate import MAIN_CPU, Gate, main_metric
from tunbench.report.compare.load import run_name
from tunbench.report.compare.metrics import (
    METRIC_KINDS,
    Metric,
    counted,
    counter_mismatch,
    instr_counters,
    metrics_for,
    other_mode,
    rate_hint,
    stalled,
)
from tunbench.report.compare.pairing import by_case, match_cases, metric_units, pair_trials, pair_values
from tunbench.report.compare.repetitions import repetitions_for
from tunbench.report.compare.result import CaseComparison, CompareError, CompareResult
from tunbench.report.compare.settings import settings_differences
from tunbench.report.summary import (
    BASELINE,
    LeftOut,
    interfered,
    leave_out_interfered,
)
from tunbench.results import RunRecord, TrialRecord
from tunbench.stats import (
    MIN_PAIRS,
    Comparison,
    adjust,
    compare,
    compare_paired,
)
from tunbench.workloads import case_title


def _compare(
    va: list[float],
    vb: list[float],
    metric: Metric,
    *,
    threshold: float,
    threshold_abs: dict[str, float],
    confidence: float,
    seed: int,
    label: str,
    paired: bool = False,
) -> Comparison:
    # Absolute when the catalogue says so, and whenever a value is <= 0: never a change relative to a
    # median <= 0. Values are compared in the metric's unit, so an absolute change reads "+7.0 ms".
    # paired: va[k] and vb[k] are partners (same repetition of one run).
    absolute = metric.absolute or any(v <= 0.0 for v in va + vb)
    limit = threshold_abs.get(metric.unit, 0.0) if absolute else threshold
    return (compare_paired if paired else compare)(
        [v * metric.scale for v in va],
        [v * metric.scale for v in vb],
        higher_is_better=metric.higher_is_better,
        threshold=limit,
        confidence=confidence,
        seed=seed,
        label=label,
        absolute=absolute,
        unit=metric.unit,
    )


def _holm(rows: list[CaseComparison]) -> tuple[list[CaseComparison], list[str]]:
    """Holm-adjust the gate's family (every gated row) and, separately, the direct rows (which only feed
    a note) and the counted-work rows (which explain); see ``tunbench.stats.multiple`` for why Holm. Returns
    the rows and notes on the family."""
    notes: list[str] = []
    out = list(rows)
    for family in ("gate", "wide", "direct", "work", "info"):
        idx = [i for i, r in enumerate(rows) if _family(r) == family]
        adjusted = adjust([rows[i].result for i in idx])
        for i, res in zip(idx, adjusted, strict=True):
            out[i] = replace(rows[i], result=res)
        if family not in ("gate", "wide") or not adjusted:
            continue
        m = adjusted[0].family_size
        alpha = adjusted[0].alpha
        floors = [r.p_floor for r in adjusted if r.baseline.n and r.candidate.n]
        if m > 1 and floors and min(floors) >= alpha / m:
            need = repetitions_for(alpha / m, paired=any(r.analysis == "paired" for r in adjusted))
            notes.append(
                f"{m} gated comparisons, Holm-adjusted: the first significant one needs p < {alpha / m:.2g}, "
                f"below the rank test's floor at these repetitions ({min(floors):.2g}), so nothing can be "
                f"called significant; use --repeat {need} or more, or fewer metrics (--metrics)"
            )
    return out, notes


def _family(row: CaseComparison) -> str:
    """A row's Holm family: the gate's main or wide tier, the direct baseline's (feeds a note), counted work's
    (explains), or the info figures' (describe the measurement, such as the hosts' clock skew)."""
    if row.gated:
        return "wide" if row.wide else "gate"
    if row.metric.gates:
        return "direct"
    return "info" if row.metric.family == "info" else "work"


def all_counted(trials: list[TrialRecord]) -> bool:
    """Every ok trial of a tunnel (the direct baseline aside) has its counted instructions per byte, but for
    those left out on purpose or by accident, whose pairs drop out of the count's comparison (a side in the
    mode its adapter does not count; a trial that did not carry its fixed rate): the work gate then judges
    every case of the run."""
    tunnels = [t for t in trials if t.status == "ok" and t.tunnel != BASELINE and not (other_mode(t) or stalled(t))]
    return bool(tunnels) and all(counted(t) for t in tunnels)


def work_gate_keeps(gate: Gate, *sides: list[TrialRecord]) -> bool:
    """Whether interfered trials are kept, not left out: the work gate judges every side (the cost gate, and
    every case counted), and counted instructions are what another process's CPU does not change. compare,
    `--target-mde`'s stop (report.precision) and calibrate decide it here, so they keep the same pairs."""
    return gate.name == "cost" and all(all_counted(trials) for trials in sides)


def compare_runs(
    a: RunRecord,
    b: RunRecord,
    *,
    label_a: str | None = None,
    label_b: str | None = None,
    threshold: float = 0.0,
    threshold_abs: dict[str, float] | None = None,
    kinds: tuple[str, ...] = METRIC_KINDS,
    confidence: float = 0.95,
    seed: int = 0,
    use_pairs: bool = True,
    include_interfered: bool = False,
    gate: Gate | None = None,
) -> CompareResult:
    """Compare B (candidate) to A (baseline) per matching case and metric; Holm across the gate.

    ``gate`` (default: ``Gate()``, the cost gate) says which comparisons gate at ``threshold`` and which in
    its wide tier, at a multiple of it, in a Holm family of their own (``report.compare.gate``).

    Two labels of one run are compared paired (by repetition) where a case has >= ``MIN_PAIRS`` pairs,
    two runs unpaired (see the module docstring). use_pairs=False compares one run's labels unpaired too.
    Interfered trials are left out, with their pairs' partners in a paired design, and a note says how many
    and why (``report.summary.leave_out_interfered``); include_interfered=True keeps them."""
    same_run = a.uid == b.uid and a.id == b.id
    paired_design = same_run and use_pairs
    if same_run and (label_a is None or label_b is None or label_a == label_b):
        raise CompareError(
            f"A and B are the same {run_name(a)}: give two runs, or two labels with --label-a X --label-b Y"
        )
    gate = gate or Gate()
    abs_limits = dict(threshold_abs or {})
    kept_note = ""
    if not include_interfered and work_gate_keeps(gate, a.trials, b.trials):
        include_interfered = True  # the work gate judges counts only, which interference does not change
        if n := sum(1 for t in [*a.trials, *([] if same_run else b.trials)] if t.status == "ok" and interfered(t)):
            kept_note = (
                f"{n} interfered trial(s) kept: the work gate judges counted instructions, which another "
                "process's CPU does not change (the timed rows carry it, and do not gate)"
            )
    trials_a, left_a = leave_out_interfered(a.trials, paired=paired_design, include=include_interfered)
    trials_b, left_b = (trials_a, LeftOut()) if same_run else leave_out_interfered(b.trials, include=include_interfered)
    ga, gb = by_case(trials_a), by_case(trials_b)
    try:
        pairs = match_cases(ga, gb, label_a, label_b)
    except CompareError as e:
        left = "; ".join(x.text for x in (left_a, left_b) if x)
        hint = rate_hint([*a.trials, *([] if same_run else b.trials)])  # why the counts that keep them are missing
        if not (left or hint):
            raise
        why = f"{e}: {left}" if left else str(e)
        raise CompareError(f"{why}; {hint}" if hint else why) from None
    if not pairs:
        la = ", ".join(sorted({k.label for k in ga})) or "none"
        lb = ", ".join(sorted({k.label for k in gb})) or "none"
        raise CompareError(
            f"no matching cases between A (labels: {la}) and B (labels: {lb}); "
            "to compare differently labelled builds use --label-a X --label-b Y"
        )
    matched_trials = [t for ka, kb in pairs for t in (*ga[ka], *gb[kb])]
    if mixed := counter_mismatch([t for ka, _ in pairs for t in ga[ka]], [t for _, kb in pairs for t in gb[kb]]):
        raise CompareError(mixed)
    rows: list[CaseComparison] = []
    notes: list[str] = [
        f"{side}{left.text}" for side, left in (("" if same_run else "A: ", left_a), ("B: ", left_b)) if left
    ]
    notes += [kept_note] if kept_note else []
    metrics = metrics_for(trials_a + trials_b, kinds)
    dropped = 0
    too_few: list[str] = []
    warm = paired_design and any("warm" in t.params for t in trials_a)
    for ka, kb in pairs:
        ta, tb = ga[ka], gb[kb]
        tunnel = ta[0].tunnel
        case_gated = not (tunnel == BASELINE and tb[0].tunnel == BASELINE)
        trial_pairs: list[tuple[TrialRecord, TrialRecord]] = []
        if paired_design:
            trial_pairs, lost = pair_trials(ta, tb)
            dropped += lost
            if lost:
                notes.append(
                    f"{case_title(ka)}: {lost} repetition(s) dropped from the pairs (partner failed or missing), "
                    f"{len(trial_pairs)} pairs left"
                )
        main = main_metric(
            [m.name for m in metrics if m.name in MAIN_CPU and metric_units(ta, m) and metric_units(tb, m)]
        )
        for metric in metrics:
            tier = gate.tier(metric, main=main)
            if tier is None:
                continue
            va, vb = metric_units(ta, metric), metric_units(tb, metric)
            if not va or not vb:
                # a side without a good trial (not a workload without this figure: rr has no throughput_bps)
                empty = next((side for side, ts in (("A", ta), ("B", tb)) if all(t.status != "ok" for t in ts)), "")
                note = f"{case_title(ka)}: no successful trials on {empty}; not compared"
                if metric.kind == "throughput" and empty and note not in notes:
                    notes.append(note)
                continue
            paired = False
            if paired_design:
                pa, pb = pair_values(trial_pairs, metric)
                if len(pa) >= MIN_PAIRS:
                    va, vb, paired = pa, pb, True
                else:
                    if warm and pa:  # windows of one bring-up are not independent samples either
                        va, vb = pa, pb
                    too_few.append(f"{case_title(ka)} {metric.title}")
                    if metric.kind == "throughput" or len(too_few) == 1:
                        notes.append(
                            f"{case_title(ka)} {metric.title}: {len(pa)} pair(s) by repetition, fewer than "
                            f"{MIN_PAIRS}: compared unpaired"
                        )
            label = f"{case_title(ka)} {metric.title}"
            res = _compare(
                va, vb, metric, threshold=gate.threshold(tier, threshold), threshold_abs=abs_limits,
                confidence=confidence, seed=seed, label=label, paired=paired,
            )  # fmt: skip
            gated = case_gated and tier != ""
            rows.append(CaseComparison(ka, kb, tunnel, metric, res, gated, gated and tier == "wide"))
    rows, family_notes = _holm(rows)
    notes.extend(family_notes)
    for r in rows:  # the direct baseline's rows only: a tunnel's row shown but not gated (the timed rows beside
        # the work gate) says nothing about the host
        if r.tunnel == BASELINE and r.metric.gates and r.result.significant:
            notes.append(
                f"the direct baseline changed ({r.case_label}, {r.metric.title}: {fmt_change(r.result)}): "
                "the host itself measured differently between A and B, so distrust the other verdicts"
            )
    judged = [t for ka, kb in pairs for t in (*ga[ka], *gb[kb])]
    notes.extend(uncounted_notes(judged))
    if hint := rate_hint(judged):
        notes.append(hint)
    if not a.provenance.get("hosts") and (note := unplaced_note(rows, [t for ka, _ in pairs for t in ga[ka]])):
        notes.append(note)
    settings = settings_differences(
        [t for ka, _ in pairs for t in ga[ka]],
        [t for _, kb in pairs for t in gb[kb]],
        a.provenance.get("hosts"),
        b.provenance.get("hosts"),
    )
    matched_a = {ka for ka, _ in pairs}
    matched_b = {kb for _, kb in pairs}
    scope_a = [k for k in ga if label_a is None or k.label == (label_a or label_b)]
    scope_b = [k for k in gb if label_b is None or k.label == (label_b or label_a)]
    analysis, reason = _analysis(rows, same_run, use_pairs, dropped, warm)
    return CompareResult(
        a_name=run_name(a) + (f" [{label_a}]" if label_a else ""),
        b_name=run_name(b) + (f" [{label_b}]" if label_b else ""),
        threshold=threshold,
        rows=tuple(rows),
        unmatched_a=tuple(k for k in scope_a if k not in matched_a),
        unmatched_b=tuple(k for k in scope_b if k not in matched_b),
        notes=tuple(dict.fromkeys(notes)),
        threshold_abs=abs_limits,
        settings=tuple(settings),
        analysis=analysis,
        analysis_reason=reason,
        dropped_pairs=dropped,
        gate=gate,
        instr_counter=next(iter(sorted(instr_counters(matched_trials))), ""),
    )


def uncounted_notes(trials: list[TrialRecord]) -> list[str]:
    """Where instructions were counted (`run --count-instructions`) but a role of a tunnel was not, why: its
    comparison then falls back to the CPU time, and the reader should know which."""
    seen: dict[tuple[str, str], str] = {}
    for t in trials:
        for role, why in sorted((t.params.get("instr") or {}).items()):
            seen.setdefault((t.label, role), str(why))
    return [f"instructions of {label} {role} {why}" for (label, role), why in seen.items()]


def unplaced_note(rows: list[CaseComparison], trials: list[TrialRecord]) -> str:
    """A caution when a paired verdict rests on pairs measured without CPU placement: there, a scheduler
    state can outlast a trial, pairs are then not independent and the paired test calls changes more
    often than its level (A/A runs on a 2-CPU VM: docs/benchmarks/precision.md, docs/precision.md). ""
    otherwise (and for a run on hosts, which the caller leaves out: placement there is the hosts' own)."""
    decided = [r for r in rows if r.gated and r.result.analysis == "paired" and r.result.significant]
    if not decided or any(t.params.get("cpuset") for t in trials):
        return ""
    return (
        "the pairs were measured without CPU placement, where A/A comparisons on a small host called changes "
        "more often than the test's level (docs/precision.md): confirm this verdict with a second run, or "
        "measure with --cpuset split"
    )


def _analysis(
    rows: list[CaseComparison], same_run: bool, use_pairs: bool, dropped: int, warm: bool = False
) -> tuple[str, str]:
    """("paired" | "unpaired" | "mixed", why) for the caption."""
    if not same_run:
        return "unpaired", "A and B are different runs, so their trials are not pairs"
    if not use_pairs:
        return "unpaired", "one run's labels compared as independent samples (--unpaired)"
    n = sorted({r.result.n_pairs for r in rows if r.result.analysis == "paired"})
    unpaired = sum(1 for r in rows if r.result.analysis != "paired")
    lost = f", {dropped} dropped (partner failed or missing)" if dropped else ""
    if not n:
        return "unpaired", f"one run, but fewer than {MIN_PAIRS} pairs by repetition{lost}"
    count = f"{n[0]}" if len(n) == 1 else f"{n[0]}-{n[-1]}"
    why = f"{count} pairs of the same run, by repetition{lost}"
    if warm:
        why = f"{count} pairs of the same run, by repetition; warm windows as one pair per pair of bring-ups{lost}"
    if unpaired:
        return "mixed", f"{why}; {unpaired} comparison(s) with fewer than {MIN_PAIRS} pairs unpaired"
    return "paired", why
