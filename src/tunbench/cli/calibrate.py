"""`tunbench calibrate -t TUNNEL`: a short A/A run, then this host's noise per metric and the MDE a paired
comparison can expect per minute of budget (the statistics: tunbench.stats.calibrate).

The A/A is an ordinary run, stored like any other (named calibrate-<tunnel>): the tunnel twice, as labels
`a` and `b`, in paired blocks (`[run] order = "blocks"`), one iperf3 case of short trials. `compare` can read
it again (`tunbench compare calibrate-wireguard-go --label-a a --label-b b`).
"""

from __future__ import annotations

import math
import os
import re
import shlex
import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from tunbench.cli.console import console
from tunbench.cli.options import DEFAULT_DB, DbOpt, GateOpt, gate_flag, parse_budget, parse_share
from tunbench.cli.outcome import exit_for
from tunbench.cli.progress import RunProgress

if TYPE_CHECKING:
    from tunbench.config.cpuset import CpuSetting
    from tunbench.config.schema import Scenario
    from tunbench.plan import PlannedTrial, RunPlan
    from tunbench.report.compare import Gate, Metric
    from tunbench.results import RunRecord, TrialRecord
    from tunbench.stats import NoiseBudget

LABELS = ("a", "b")
MIN_PAIRS = 2  # the fewest pairs that give a spread at all


def labelled(ref: str, label: str) -> str:
    """`wireguard-go` -> `wireguard-go[label=a]`; `x[mtu=1400]` -> `x[mtu=1400,label=a]`."""
    ref = ref.strip()
    if re.search(r"[\[,]\s*label\s*=", ref):
        raise typer.BadParameter(f"{ref!r}: calibrate labels the two sides a and b itself", param_hint="--tunnel")
    return f"{ref[:-1]},label={label}]" if ref.endswith("]") else f"{ref}[label={label}]"


class _Clocked(RunProgress):
    """The progress display, and when the first trial started and the last one ended (monotonic seconds):
    what the pairs cost, apart from what the run costs around them."""

    first_start: float | None = None
    last_done: float | None = None

    def trial_started(self, pt: PlannedTrial) -> None:
        if self.first_start is None:
            self.first_start = time.monotonic()
        super().trial_started(pt)

    def trial_done(self, pt: PlannedTrial, rec: TrialRecord) -> None:
        self.last_done = time.monotonic()
        super().trial_done(pt, rec)


def calibrate(
    tunnel: Annotated[
        str,
        typer.Option("--tunnel", "-t", help="The tunnel to calibrate: NAME, NAME[key=value,...] or ./adapter.toml."),
    ],
    budget: Annotated[
        str,
        typer.Option(help="Wall time for the A/A, e.g. 60s, 2m: pairs until it is spent (at least 2)."),
    ] = "60s",
    pairs: Annotated[
        int | None, typer.Option(min=MIN_PAIRS, help="Measure this many pairs instead (overrides --budget).")
    ] = None,
    duration: Annotated[int, typer.Option(min=1, help="Seconds measured per trial.")] = 2,
    omit: Annotated[int, typer.Option(min=0, help="Warm-up seconds excluded from each trial.")] = 1,
    direction: Annotated[str, typer.Option(help="up, down or bidir.")] = "up",
    flows: Annotated[int, typer.Option(min=1, max=128, help="Parallel TCP flows.")] = 1,
    profile: Annotated[str, typer.Option(help="WAN profile (see `tunbench profiles`).")] = "lan",
    target: Annotated[
        str, typer.Option(help="A change you want to detect, e.g. 3%: the output says what budget finds it.")
    ] = "3%",
    name: Annotated[str | None, typer.Option(help="The run's name (default: calibrate-<tunnel>).")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed for the order within each pair.")] = None,
    warm: Annotated[
        int,
        typer.Option(
            min=1,
            max=100,
            help="Pairs per bring-up: the two tunnels come up once, side by side, for this many pairs of "
            "measured windows (warm alternation, `tunbench run --warm`); 1 = a fresh bring-up per trial.",
        ),
    ] = 1,
    cpuset: Annotated[
        str | None,
        typer.Option(
            "--cpuset",
            help="CPU placement of each side, as for `tunbench run --cpuset`, but split by default where the "
            "host has 2 CPUs or more (it halved the CPU/bit noise here: docs/benchmarks/precision.md); off to "
            "measure unplaced.",
        ),
    ] = None,
    include_interfered: Annotated[
        bool,
        typer.Option(
            "--include-interfered",
            help="Keep pairs with a trial whose window was interfered with (another tunbench run, foreign CPU, "
            "steal); by default they are left out, and a line says how many and why.",
        ),
    ] = False,
    gate: GateOpt = "cost",
    db: DbOpt = DEFAULT_DB,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print what calibrate would run (tunnel, pairs, budget, the time it would take, the gate it "
            "calibrates) and exit: creates nothing, needs no root; missing programs are reported, not required.",
        ),
    ] = False,
) -> None:
    """Measure this host's noise with a short A/A run, and the MDE to expect per minute of budget.

    Runs TUNNEL twice, as labels a and b of one run, in paired blocks (each pair: a and b back to back, ab
    and ba equally often), with short iperf3 trials (--duration 2 --omit 1) until --budget (60s) is spent,
    each side on a CPU of its own (--cpuset split, where the host has two or more):
    a pair starts only if, at the pace so far, it ends within the budget. The run is stored like any other,
    named calibrate-<tunnel>.

    Then, per metric (the tunnel's CPU per bit delivered, throughput, the wire overhead, each side's CPU per
    bit) and as the gate will judge it (--gate cost: the tunnel's CPU per bit delivered at --target; the
    others in a family of their own at twice --target):
    the CV of one trial, the SD of the within-pair log ratio ln(b/a) (the noise a paired `compare` sees
    through), the MDE at the pairs measured, and the MDE projected to 1, 2, 5 and 10 minutes, with the
    budget that reaches each metric's target. MDE: the change a paired comparison detects with 80% power at
    its tier's Holm level. The projection assumes the within-pair noise stays as measured and pairs cost
    what they cost here, so it falls as about 1/sqrt(pairs) (4x the budget, half the MDE). The table is
    recorded with the run (its provenance, `calibration`).

    Needs root, except with --dry-run. Exit status as for `tunbench run`.
    """
    from tunbench import session
    from tunbench.cli.checks import check_store_path
    from tunbench.cli.progress import graceful_signals
    from tunbench.config.load import load_scenario, with_overrides
    from tunbench.report.precision import windows_per_bringup
    from tunbench.runner import Deadline
    from tunbench.store.backend import redact
    from tunbench.store.db import Store
    from tunbench.tunnels.registry import parse_ref

    started = time.monotonic()  # the run's cost besides its pairs counts from here
    budget_s = parse_budget(budget)
    goal = parse_share(target, "--target")
    tiers = gate_flag(gate)
    refs = [labelled(tunnel, label) for label in LABELS]
    adapter = parse_ref(refs[0]).name
    sc, _, source = load_scenario(None)
    overrides: dict[str, dict[str, object]] = {
        "run": {
            "tunnels": refs,
            "profiles": [profile],
            "repeat": 1,
            "direct": False,
            "seed": seed,
            "name": name or f"calibrate-{adapter}",
            "order": "blocks",
            "warm": warm,
            "cpuset": cpuset if cpuset is not None else default_cpuset(),
        },
        "workload": {
            "kind": ["iperf3"],
            "flows": [flows],
            "directions": [direction],
            "duration_s": duration,
            "omit_s": omit,
        },
    }
    sc = with_overrides(sc, overrides)
    check_store_path(db, connect=not dry_run)
    # --budget: the plan holds as many pairs as the measured seconds alone allow (no pair can be faster), and
    # the run stops at the deadline; --pairs: exactly that many
    sized = None if pairs is not None else session.Budget(budget_s, budget, must_fit=MIN_PAIRS)
    if pairs is not None:
        sc = with_overrides(sc, {"run": {"repeat": pairs}})
    plan = session.prepare(sc, source, budget=sized, dry_run=dry_run)
    n = plan.scenario.run.repeat
    wl = plan.scenario.workload
    per_pair = sum(session.expected_s(pt, plan.options, wl.window) for pt in plan.trials[:2])
    text = equivalent_run(plan.scenario, budget=None if pairs is not None else budget)
    if dry_run:
        sized_by = None if pairs is not None else (budget_s, budget)
        for said in dry_run_lines(plan, budget=sized_by, goal=goal, gate=tiers):
            console.print(said, markup=False, highlight=False)
        return
    clock = _Clocked(console, db)
    deadline = None if pairs is not None else Deadline(started + budget_s, min_blocks=MIN_PAIRS)
    if deadline is not None:
        console.print(f"calibrate: pairs until the budget ({budget}) is spent, at most {n} (the plan below)")
    with graceful_signals(console), clock:
        outcome = session.execute(plan, clock, scenario_text=text, db_path=db, stop=deadline)
    total_s = time.monotonic() - started
    with Store(db) as store:
        run_rec = store.find_run(str(outcome.run_id))
    ran = len({t.repetition for t in run_rec.trials}) or n
    if outcome.stopped:
        console.print(f"stopped after {ran} of at most {n} pairs, at the budget ({budget}): {outcome.stopped}")
    span = (clock.last_done or started) - (clock.first_start or started)
    # the unit of the paired analysis: a pair of trials, or with --warm a pair of bring-ups (its windows' mean)
    pair_s = span / ran * windows_per_bringup(run_rec) if span > 0 else per_pair * warm
    overhead_s = max(0.0, total_s - span)
    noise = noise_per_metric(
        run_rec, pair_s=pair_s, overhead_s=overhead_s, target=goal, include_interfered=include_interfered, gate=tiers
    )
    for line in calibration_lines(
        run_rec, pair_s=pair_s, overhead_s=overhead_s, target=goal, include_interfered=include_interfered, gate=tiers,
        noise=noise,
    ):  # fmt: skip
        console.print(line)
    if noise:
        with Store(db) as store:
            store.update_provenance(
                outcome.run_id, {**run_rec.provenance, "calibration": calibration_record(noise, tiers)}
            )
    console.print(
        f"stored in {redact(db)} as run #{outcome.run_id} ({outcome.uid}, {escape(run_rec.name)}); "
        f"`tunbench compare {escape(run_rec.name)} --label-a a --label-b b` compares it again"
    )
    exit_for(outcome.status, run_rec.trials, some="; their pairs are left out")


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
    lines.append(
        f"then: this host's noise per metric and the MDE per budget, as --gate {gate.name} judges it "
        + (
            f"(the tunnel's CPU per bit delivered at ±{goal:.1%}; throughput, the wire overhead and each side's "
            f"CPU per bit at ±{wide:.1%}), and an A/A check"
            if gate.name == "cost"
            else f"(every metric at ±{goal:.1%}), and an A/A check"
        )
    )
    lines.append("the same A/A as a run: " + equivalent_run(plan.scenario).splitlines()[1].removeprefix("# "))
    lines += session.skipped_lines(plan)
    lines += [f"note: a real run would fail: {note}" for note in plan.notes]
    return lines


def default_cpuset() -> str | None:
    """split where this host can place (2+ CPUs and a cpuset hierarchy tunbench may use), else the run's."""
    from tunbench.host.cgroup import cpuset_root

    return "split" if (os.cpu_count() or 1) >= 2 and cpuset_root() is not None else None


def equivalent_run(sc: Scenario, budget: str | None = None) -> str:
    """The `tunbench run` command that measures the same A/A (stored as the run's scenario text: calibrate has
    no scenario file; the resolved scenario is stored beside it, as for every run). `budget`: the run stops
    when it is spent, so --repeat is an upper bound."""
    r, w = sc.run, sc.workload
    tunnels = " ".join(f"-t {shlex.quote(t)}" for t in r.tunnels)
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


# ---- the calibration, from a stored A/A run (pure) -----------------------------------------------------


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
    from tunbench.report.summary import leave_out_interfered
    from tunbench.stats import noise_budget

    gate = gate or Gate()
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
    tiers = {m.name: tier for m, _, _ in values if (tier := gate.tier(m, main=main)) is not None}
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


def _minutes(s: float) -> str:
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.1f} min"


def _budget(s: float) -> str:
    return f"{s / 60:g} min" if s >= 60 and (s / 60).is_integer() else _minutes(s)


def calibration_table(noise: list[tuple[Metric, NoiseBudget]]) -> Table:
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
        need = f"{nb.target_pairs} pairs, {_minutes(nb.target_s)}" if nb.target_pairs else "–"
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


ASSUMPTION = (
    "assumption: the projected MDEs fall as about 1/sqrt(pairs) because they take the within-pair noise "
    "measured here as the noise of any longer run on this host (same load, pairs independent, same trials "
    "and set-up per pair); the pair sd is itself an estimate (its CI), and so are they"
)


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
    from tunbench.report.compare import CompareError, compare_runs, verdict_line
    from tunbench.report.summary import leave_out_interfered
    from tunbench.workloads import case_title as case_text

    if noise is None:  # the caller's, when it has them (calibrate records them too)
        noise = noise_per_metric(
            run_rec, pair_s=pair_s, overhead_s=overhead_s, target=target, include_interfered=include_interfered,
            gate=gate,
        )  # fmt: skip
    _, left = leave_out_interfered(run_rec.trials, paired=True, include=include_interfered)
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
