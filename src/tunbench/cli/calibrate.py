"""`tunbench calibrate -t TUNNEL`: a short A/A run, then this host's noise per metric and the MDE a paired
comparison can expect per minute of budget (the statistics: tunbench.stats.calibrate).

The A/A is an ordinary run, stored like any other (named calibrate-<tunnel>): the tunnel twice, as labels
`a` and `b`, in paired blocks (`[run] order = "blocks"`), one iperf3 case of short trials. `compare` can read
it again (`tunbench compare calibrate-wireguard-go --label-a a --label-b b`).

The command parses its flags, runs and prints; the A/A as a plan is session/calibration.py's, what the stored
run says is report/calibration.py's.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from tunbench.cli.console import console
from tunbench.cli.options import DEFAULT_DB, DbOpt, GateOpt, gate_flag, parse_budget, parse_share
from tunbench.cli.outcome import exit_for
from tunbench.cli.progress import RunProgress
from tunbench.cli.run_flags import InstrCounterOpt
from tunbench.report.calibration import LABELS, MIN_PAIRS

if TYPE_CHECKING:
    from tunbench.plan import PlannedTrial
    from tunbench.results import TrialRecord


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
    count_instructions: Annotated[
        bool,
        typer.Option(
            "--count-instructions",
            help="Calibrate the work gate: the A/A counts each side's instructions with callgrind (with perf "
            "where this host's CPU counters can be read, as `run --instr-counter auto`) over a fixed UDP load "
            "(as `tunbench run -w udp --count-instructions`), and the table gives the noise of instructions/byte "
            "(docs/work-gate.md).",
        ),
    ] = False,
    instr_counter: InstrCounterOpt = None,
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

    With --count-instructions it calibrates the work gate instead: udp trials at a fixed 5 Mbit/s, each
    side's tunnel counted by callgrind (by perf where this host's CPU counters can be read: `--instr-counter`,
    `[run] instr_counter`), and the table leads with instructions/byte (docs/work-gate.md).

    Needs root, except with --dry-run. Exit status as for `tunbench run`.
    """
    from tunbench import session
    from tunbench.cli.checks import check_store_path
    from tunbench.cli.progress import graceful_signals
    from tunbench.config.load import load_scenario
    from tunbench.report.calibration import calibration_lines, calibration_record, noise_per_metric
    from tunbench.runner import Deadline
    from tunbench.session import calibration as aa
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
    sc = aa.aa_scenario(
        sc, refs, name=name or f"calibrate-{adapter}", profile=profile, seed=seed, warm=warm,
        cpuset=cpuset, flows=flows, direction=direction,
        duration_s=duration, omit_s=omit, pairs=pairs, count_instructions=count_instructions,
        instr_counter=instr_counter,
    )  # fmt: skip
    check_store_path(db, connect=not dry_run)
    # --budget: the plan holds as many pairs as the measured seconds alone allow (no pair can be faster), and
    # the run stops at the deadline; --pairs: exactly that many
    sized = None if pairs is not None else session.Budget(budget_s, budget, must_fit=MIN_PAIRS)
    plan = session.prepare(sc, source, budget=sized, dry_run=dry_run)
    n = plan.scenario.run.repeat
    text = aa.equivalent_run(plan.scenario, budget=None if pairs is not None else budget)
    if dry_run:
        sized_by = None if pairs is not None else (budget_s, budget)
        for said in aa.dry_run_lines(plan, budget=sized_by, goal=goal, gate=tiers):
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
    pair_s = aa.pair_s(run_rec, span_s=span, pairs=ran, planned_s=aa.planned_pair_s(plan), warm=warm)
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
