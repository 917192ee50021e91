"""The A/A run `tunbench calibrate` measures, as a plan: its scenario (the tunnel twice, as labels `a` and
`b` of one run in paired blocks, one iperf3 case of short trials), the CPU placement it takes by default,
the `tunbench run` it amounts to, what its dry run says, and what one pair cost once it has run.

What the stored run says about the host's noise is report/calibration.py's.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from tunbench.report.calibration import MIN_PAIRS
from tunbench.session.defaults import split_where_placeable, with_instructions_rate

if TYPE_CHECKING:
    from tunbench.config.cpuset import CpuSetting
    from tunbench.config.schema import Scenario
    from tunbench.plan import RunPlan
    from tunbench.report.compare import Gate
    from tunbench.results import RunRecord


def aa_scenario(
    sc: Scenario,
    refs: list[str],
    *,
    name: str,
    profile: str,
    seed: int | None,
    warm: int,
    cpuset: str | None,
    flows: int,
    direction: str,
    duration_s: int,
    omit_s: int,
    pairs: int | None,
    count_instructions: bool = False,
    instr_counter: str | None = None,
) -> Scenario:
    """`sc` made into the A/A: the labelled `refs` in paired blocks with no direct baseline, one iperf3 case,
    one repetition (the budget sizes it later) or exactly `pairs`; `cpuset` None takes ``split_where_placeable``.
    `count_instructions`: the work gate's A/A instead, one udp case at the fixed rate counted instructions use
    (``with_instructions_rate``), counted by `instr_counter` (None: the scenario's, `auto` by default)."""
    from tunbench.config.load import with_overrides

    run: dict[str, object] = {
        "tunnels": refs,
        "profiles": [profile],
        "repeat": 1,
        "direct": False,
        "seed": seed,
        "name": name,
        "order": "blocks",
        "warm": warm,
        "cpuset": cpuset if cpuset is not None else split_where_placeable(),
        "count_instructions": count_instructions,
    }
    if instr_counter is not None:
        run["instr_counter"] = instr_counter
    workload: dict[str, object] = {
        "kind": ["udp" if count_instructions else "iperf3"],
        "flows": [flows],
        "directions": [direction],
        "duration_s": duration_s,
        "omit_s": omit_s,
    }
    sc = with_instructions_rate(with_overrides(sc, {"run": run, "workload": workload}))
    return sc if pairs is None else with_overrides(sc, {"run": {"repeat": pairs}})


def planned_pair_s(plan: RunPlan) -> float:
    """The seconds one pair is expected to take (its first two trials'), before any has run."""
    from tunbench import session

    return sum(session.expected_s(pt, plan.options, plan.scenario.workload.window) for pt in plan.trials[:2])


def pair_s(run_rec: RunRecord, *, span_s: float, pairs: int, planned_s: float, warm: int) -> float:
    """What one unit of the paired analysis cost: a pair of trials, or with --warm a pair of bring-ups (its
    windows' mean). `span_s`: from the first trial's start to the last one's end over `pairs` pairs; none
    measured (0): `planned_s` per pair of trials."""
    from tunbench.report.precision import windows_per_bringup

    return span_s / pairs * windows_per_bringup(run_rec) if span_s > 0 else planned_s * warm


def equivalent_run(sc: Scenario, budget: str | None = None) -> str:
    """The `tunbench run` command that measures the same A/A (stored as the run's scenario text: calibrate has
    no scenario file; the resolved scenario is stored beside it, as for every run). `budget`: the run stops
    when it is spent, so --repeat is an upper bound."""
    r, w = sc.run, sc.workload
    tunnels = " ".join(f"-t {shlex.quote(t)}" for t in r.tunnels)
    if r.count_instructions:
        tunnels += " -w udp --count-instructions"
        if r.instr_counter != "auto":
            tunnels += f" --instr-counter {r.instr_counter}"
    bound = f"# (--repeat is the upper bound: calibrate --budget {budget} stops between pairs when it is spent)\n"
    return (
        "# tunbench calibrate, the same as:\n"
        f"# tunbench run {tunnels} --no-direct --profile {shlex.quote(r.profiles[0])} "
        f"--direction {w.directions[0]} --flows {w.flows[0]} --duration {w.duration_s} --omit {w.omit_s} "
        f"--repeat {r.repeat}{f' --warm {r.warm}' if r.warm > 1 else ''} --seed {r.seed} --name {shlex.quote(r.name)}"
        f"{_cpuset_flag(r.cpuset)}\n" + (bound if budget else "")
    )


def _cpuset_flag(cpuset: CpuSetting) -> str:
    return "" if cpuset.off else f" --cpuset {shlex.quote(cpuset.flag())}"


def dry_run_lines(plan: RunPlan, *, budget: tuple[float, str] | None, goal: float, gate: Gate) -> list[str]:
    """What `calibrate --dry-run` prints: the A/A's plan (as `run --dry-run` describes it), how it stops,
    the gate it calibrates, and the `tunbench run` it amounts to. Pure: reads the plan only."""
    from tunbench import session

    name = plan.scenario.run.name
    lines = [
        f"dry run of calibrate: an A/A of {plan.refs[0].name} as labels a and b, stored as {name}: nothing was created"
    ]
    lines += session.describe(plan, budget)
    n = plan.scenario.run.repeat
    if budget is not None:
        lines.append(f"stop: pairs until the budget ({budget[1]}) is spent, at least {MIN_PAIRS}, at most {n}")
    else:
        lines.append(f"stop: after {n} pairs (--pairs)")
    wide = gate.threshold("wide", goal)
    if gate.name != "cost":
        judged = f"(every metric at ±{goal:.1%})"
    elif plan.scenario.run.count_instructions:
        judged = f"(the work gate: instructions/byte at ±{goal:.1%}; each side's at ±{wide:.1%})"
    else:
        judged = (
            f"(the tunnel's CPU per bit delivered at ±{goal:.1%}; throughput, the wire overhead and each side's "
            f"CPU per bit at ±{wide:.1%})"
        )
    lines.append(f"then: this host's noise per metric and the MDE per budget, as --gate {gate.name} judges it {judged}")
    lines[-1] += ", and an A/A check"
    lines.append("the same A/A as a run: " + equivalent_run(plan.scenario).splitlines()[1].removeprefix("# "))
    lines += session.skipped_lines(plan)
    lines += [f"note: a real run would fail: {note}" for note in plan.notes]
    return lines
