"""The plan as text: what `tunbench run --dry-run` prints after its header (the tunnels, profiles and cases,
the size and time of the run, warm blocks, too few repetitions, the build), and the lines the progress
display shares with it. Pure: reads the plan only."""

from __future__ import annotations

from tunbench.plan import RunPlan
from tunbench.session.size import rounds_within
from tunbench.session.stop import StopRule
from tunbench.tunnels.adapter import InstructionsSpec
from tunbench.tunnels.programs import built
from tunbench.units import minutes
from tunbench.workloads import get as get_workload


def dry_run_lines(plan: RunPlan, stop: StopRule | None = None) -> list[str]:
    """The plan (`describe`; with a `stop`, its estimate capped by the budget), how the run would stop, what
    it skips, and what would make a real run fail (the plan's notes)."""
    lines = describe(plan, (stop.budget_s, stop.budget) if stop is not None else None)
    if stop is not None:
        lines += stop.dry_run_lines(plan)
    lines += skipped_lines(plan)
    lines += [f"note: a real run would fail: {note}" for note in plan.notes]
    return lines


def describe(plan: RunPlan, budget: tuple[float, str] | None = None) -> list[str]:
    """The plan as text, for `tunbench run --dry-run`. `budget`: (seconds, how the flag named it), when the
    run stops at a budget: the estimate is then capped by it and says how many rounds fit."""
    scenario = plan.scenario
    per_case: dict[str, tuple[float, int]] = {}
    for pt, e in zip(plan.trials, plan.expected, strict=True):
        per_case[pt.case.title] = e, pt.case.clients if get_workload(pt.case.workload).fleet else 0
    cases = []
    for title, (e, n) in per_case.items():
        cases.append(f"  {title}  (~{minutes(e)} per trial)")
        if n and (where := plan.site.fleet_line(n)):
            cases.append(f"    {where}")
    lines = [
        "tunnels: "
        + ", ".join(f"{r.label} ({', '.join([r.adapter.spec.layer.upper(), *built(r)])})" for r in plan.refs),
        "profiles: " + ", ".join(f"{p.name} ({'emulated' if p.emulated else 'veth'})" for p in plan.profiles),
        *(f"  faults of {p.name}: " + "; ".join(f.describe() for f in p.faults) for p in plan.profiles if p.faults),
        "workloads: " + ", ".join(scenario.workload.kind),
        *plan.site.lines(),
        f"cases ({len(plan.cases)}):",
        *cases,
        _size_line(plan, budget),
    ]
    if scenario.run.count_instructions:
        from tunbench.perf.hwinstr import choice_line

        rates = [
            f"{kind} offers a fixed {rate}"
            for kind in ("iperf3", "udp")
            if kind in scenario.workload.kind
            and (rate := dict(getattr(scenario.workload, kind, None) or {}).get("rate"))
        ]
        lines.append(choice_line(plan.instr_counter, plan.instr_why) + "".join(f"; {r}" for r in rates))
        lines += perf_blind_lines(plan)
    if warm := warm_note(plan):
        lines.append(warm)
    if few := repetition_warning(plan):
        lines.append(few)
    builds = [f"commit {plan.commit}"] if plan.commit else []
    builds += [f"branch {plan.branch}"] if plan.branch else []
    builds += [f"{r.label} at commit {r.commit}" for r in plan.refs if r.commit]
    if builds:
        lines.append("build: " + ", ".join(builds))
    return lines


def perf_blind_lines(plan: RunPlan) -> list[str]:
    """A line per adapter that perf cannot count, when perf is the counter: one whose count comes in two modes
    that only a split by shared object tells apart (`[instructions]` in its adapter: OpenVPN's)."""
    if plan.instr_counter != "perf":
        return []
    from tunbench.perf.hwinstr import MODES_UNSEEN

    blind: dict[str, tuple[InstructionsSpec, list[str]]] = {}
    for r in plan.refs:
        if (spec := r.adapter.spec.instructions) is not None:
            blind.setdefault(r.adapter.spec.name, (spec, []))[1].append(r.label)
    lines = []
    for name, (spec, labels) in blind.items():
        who = name if labels == [name] else f"{name} ({', '.join(labels)})"
        lines.append(f"note: {who}: {MODES_UNSEEN.format(mode=spec.mode)}")
    return lines


def _size_line(plan: RunPlan, budget: tuple[float, str] | None) -> str:
    """'4 cases × 3 repetitions = 12 trials, about 66 s (seed 1)'; with a budget, the planned repetitions are
    an upper bound and the estimate is what fits: 'about 2.0 min: 12 of the 20 planned rounds fit in --budget
    2m at the estimate (4.0 min if all ran)'."""
    scenario = plan.scenario
    reps, seed = scenario.run.repeat, scenario.run.seed
    size = f"{plural(len(plan.cases), 'case')} × {plural(reps, 'repetition')} = {plural(len(plan.trials), 'trial')}"
    if budget is None:
        return f"{size}, about {minutes(plan.total_s)} (seed {seed})"
    seconds, text = budget
    fit = rounds_within(plan, seconds)
    if fit >= reps:
        return f"{size}, about {minutes(plan.total_s)}, within the budget ({text}) (seed {seed})"
    est = plan.total_s * fit / max(1, reps)
    return (
        f"{size} at most, about {minutes(est)}: {fit} of the {reps} planned rounds fit in the budget ({text}) at "
        f"the estimate of each trial ({minutes(plan.total_s)} if all ran) (seed {seed})"
    )


def warm_note(plan: RunPlan) -> str:
    """How the run's warm blocks measure ("" when every trial is cold)."""
    warm = [pt for pt in plan.trials if pt.warm]
    if not warm:
        return ""
    bringups = len({(pt.block, pt.case.tunnel.label) for pt in warm})
    return (
        f"warm: {len(warm)} trial(s) are windows on running tunnels, {plan.warm} per bring-up "
        f"({bringups} bring-ups instead of {len(warm)})"
    )


def repetition_warning(plan: RunPlan) -> str:
    """The one minimum-repetition rule (stats.min_repetitions via report.compare.repetition_note) applied to
    this plan: a warning when its repetitions cannot give compare any verdict for the gated family ("" else)."""
    from tunbench.report.compare import repetition_note

    labels = {pt.case.tunnel.label for pt in plan.trials if pt.case.tunnel.name != "direct"}
    if not labels:
        return ""
    units: dict[tuple[str, str], set[object]] = {}
    for pt in plan.trials:
        if pt.case.tunnel.name != "direct":
            units.setdefault((pt.case.tunnel.label, pt.case.title), set()).add(("b", pt.block) if pt.warm else pt.seq)
    cases = max(sum(1 for label, _ in units if label == one) for one in labels)
    return repetition_note(
        labels=len(labels),
        cases_per_label=cases,
        units=min(len(u) for u in units.values()),
        warm=max(1, plan.warm),
    )


def skipped_lines(plan: RunPlan) -> list[str]:
    """One line per reason: the tunnel × workload pairs that will not run, and why."""
    by_reason: dict[str, list[str]] = {}
    for label, kind, reason in plan.skipped:
        by_reason.setdefault(reason, []).append(f"{label} × {kind}")
    return [f"note: skipped {', '.join(pairs)}: {reason}" for reason, pairs in by_reason.items()]


def plural(n: int, word: str, many: str = "") -> str:
    """'1 case', '2 cases'."""
    return f"{n} {word if n == 1 else many or word + 's'}"
