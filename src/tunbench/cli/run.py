"""`tunbench run`: flags -> scenario -> session (plan, checks, trials) -> the run's tables."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from tunbench.cli.agent import HostsOpt
from tunbench.cli.console import console
from tunbench.cli.options import DEFAULT_DB, CpusetOpt, DbOpt, GateOpt, gate_flag
from tunbench.cli.outcome import exit_for
from tunbench.cli.run_flags import (
    BranchOpt,
    BudgetOpt,
    CommitOpt,
    CoresOpt,
    CountInstructionsOpt,
    CountWorkOpt,
    DirectionOpt,
    DryRunOpt,
    DurationOpt,
    FlamegraphDirOpt,
    FlamegraphOpt,
    FlowsOpt,
    ForeignCpuOpt,
    FullOpt,
    InstrCounterOpt,
    IpOpt,
    JsonOpt,
    MtuOpt,
    NameOpt,
    NoDirectOpt,
    OmitOpt,
    OverlayOpt,
    ProfileOpt,
    RedoInterferedOpt,
    RedoStealOpt,
    RepeatOpt,
    ScenarioArg,
    SeedOpt,
    SiteOpt,
    TargetMdeOpt,
    TunnelOpt,
    UntilOpt,
    WarmOpt,
    WorkloadOpt,
)
from tunbench.cli.run_values import build_id, csv_list, family, percent, precision_flags, split_profiles, split_tunnels

if TYPE_CHECKING:
    from tunbench.plan import RunPlan
    from tunbench.runner import StopCheck
    from tunbench.session import RunOutcome, StopRule


def _what_runs(source: str, tunnel: list[str] | None, profile: list[str] | None, workload: str | None) -> str:
    """The header's name for what the dry run plans: the scenario, and which of its parts the flags replaced
    ('<default scenario>, its tunnels from -t')."""
    replaced = [
        part for part, flag in (("tunnels from -t", tunnel), ("profiles from --profile", profile),
                                ("workloads from -w", workload)) if flag
    ]  # fmt: skip
    return source + (f", its {', '.join(replaced)}" if replaced else "")


def run(
    scenario: ScenarioArg = None,
    tunnel: TunnelOpt = None,
    profile: ProfileOpt = None,
    workload: WorkloadOpt = None,
    flows: FlowsOpt = None,
    cores: CoresOpt = None,
    direction: DirectionOpt = None,
    duration: DurationOpt = None,
    omit: OmitOpt = None,
    repeat: RepeatOpt = None,
    warm: WarmOpt = None,
    redo_steal: RedoStealOpt = None,
    redo_interfered: RedoInterferedOpt = False,
    foreign_cpu: ForeignCpuOpt = None,
    full: FullOpt = False,
    no_direct: NoDirectOpt = False,
    mtu: MtuOpt = None,
    ip: IpOpt = None,
    overlay: OverlayOpt = None,
    seed: SeedOpt = None,
    name: NameOpt = None,
    commit: CommitOpt = None,
    branch: BranchOpt = None,
    json_out: JsonOpt = None,
    flamegraph: FlamegraphOpt = False,
    flamegraph_dir: FlamegraphDirOpt = Path("results/flamegraphs"),
    count_work: CountWorkOpt = False,
    count_instructions: CountInstructionsOpt = False,
    instr_counter: InstrCounterOpt = None,
    dry_run: DryRunOpt = False,
    target_mde: TargetMdeOpt = None,
    budget: BudgetOpt = None,
    until: UntilOpt = None,
    cpuset: CpusetOpt = None,
    gate: GateOpt = "cost",
    db: DbOpt = DEFAULT_DB,
    hosts: HostsOpt = None,
    site: SiteOpt = None,
) -> None:
    """Measure tunnels: build namespaces, start each tunnel, push iperf3 traffic through it, record cost.

    Needs root (namespaces, cgroups), except with --dry-run. With --hosts, the client and server roles run on
    the inventory's hosts (reached with `ssh`, each running `tunbench agent`) instead of local namespaces.

    Exit status: 0 = every trial ok; 2 = invalid scenario, adapter, profile or flag; 3 = a program it needs
    is missing; 4 = the run finished but some trials failed; 5 = no trial measured anything; 6 = an error
    stopped the run (not root, the store, a tunnel, a host); 70 = a bug of tunbench's (the traceback's log
    is named); 130 = interrupted (finished trials are kept). Never 1: that is a verdict's (compare, history).
    """
    import time

    from tunbench import session
    from tunbench.cli.progress import RunProgress, graceful_signals
    from tunbench.config.load import load_scenario, with_overrides

    started = time.monotonic()  # --budget counts from here
    goal, budget_s = precision_flags(target_mde, budget, until)
    tiers = gate_flag(gate)
    budget = f"until {until}" if until is not None else budget  # how the plan and the stop name it
    stop = session.StopRule(budget_s, budget or "", started, goal, tiers) if budget_s is not None else None
    sc, text, source = load_scenario(scenario)
    where = session.run_site(site, hosts, sc, source, text)
    if cpuset is None and not (cores or sc.workload.cores):  # an A/B comparison places its sides unless told
        # otherwise (--cpuset off); the cores axis places them itself
        cpuset = session.ab_cpuset(sc, compares=goal is not None, on_hosts=not where.programs_here)
    overrides: dict[str, dict[str, object]] = {
        "run": {
            "tunnels": split_tunnels(tunnel),
            "profiles": split_profiles(profile),
            "repeat": repeat if repeat is not None else (5 if full else None),
            "direct": False if no_direct else None,
            "seed": seed,
            "name": name,
            "warm": warm,
            "redo_steal_pct": percent(redo_steal, "--redo-steal"),
            "redo_interfered": True if redo_interfered else None,
            "count_work": True if count_work else None,
            "count_instructions": True if count_instructions else None,
            "instr_counter": instr_counter,
            "foreign_cpu_pct": percent(foreign_cpu, "--foreign-cpu"),
            "cpuset": cpuset,
        },
        "workload": {
            "kind": csv_list(workload),
            "flows": csv_list(flows, int),
            "cores": csv_list(cores, int),
            "directions": csv_list(direction),
            "duration_s": 10 if full and duration is None else duration,
            "omit_s": omit,
        },
        "topology": {"mtu": mtu, "underlay": family(ip, "--ip"), "overlay": family(overlay, "--overlay")},
    }
    sc = session.with_instructions_rate(with_overrides(sc, overrides))
    svgs = flamegraph_dir if flamegraph else None
    _check_outputs(db, json_out, svgs, connect=not dry_run)
    build = build_id(commit, "--commit"), build_id(branch, "--branch")
    plan = session.prepare(
        sc,
        source,
        dry_run=dry_run,
        text=text if tunnel is None and profile is None else "",  # errors in run.tunnels name the file's line
        flamegraphs=flamegraph,
        site=where,
        budget=stop.sizing(fixed=repeat is not None or full) if stop is not None else None,
        build=build,
        cores_flag=cores is not None,
    )
    _target_labels(stop, plan)
    if dry_run:
        what = _what_runs(source, tunnel, profile, workload)
        console.print(f"dry run of {what}: nothing was created", highlight=False)
        for line in session.dry_run_lines(plan, stop):
            console.print(line, markup=False, highlight=False)
        return
    for line in session.skipped_lines(plan):
        console.print(f"[yellow]{escape(line)}[/]")
    if stop is not None:
        console.print(stop.text(plan), highlight=False)
    with graceful_signals(console), RunProgress(console, db) as progress:
        check = stop.check(plan, progress.note) if stop is not None else None
        outcome = session.execute(
            plan,
            progress,
            scenario_text=text,
            db_path=db,
            flamegraph_dir=svgs,
            stop=check,
            budget_ends=stop.ends if stop is not None else None,
        )
    _finish(outcome, db, json_out, stop, check)


def _target_labels(stop: StopRule | None, plan: RunPlan) -> None:
    """--target-mde needs exactly two tunnel labels besides direct: a usage error naming the flag otherwise."""
    from tunbench.session import TargetRefused

    try:
        if stop is not None:
            stop.labels(plan)
    except TargetRefused as e:
        raise typer.BadParameter(str(e), param_hint="--target-mde") from None


def _check_outputs(db: str, json_out: Path | None, flamegraph_dir: Path | None, *, connect: bool) -> None:
    """The store and the files the run will write, checked before it starts, not when it ends."""
    from tunbench.cli.checks import check_output_dir, check_output_path, check_store_path

    check_store_path(db, connect=connect)
    if json_out is not None:
        check_output_path(json_out, "--json")
    if flamegraph_dir is not None:
        check_output_dir(flamegraph_dir, "--flamegraph-dir")


def _finish(
    outcome: RunOutcome, db: str, json_out: Path | None, stop: StopRule | None, check: StopCheck | None
) -> None:
    """After the run: its tables, the JSON export, how the stop ended it, where it is stored, the exit status."""
    from tunbench.cli.show import print_run
    from tunbench.store.backend import redact
    from tunbench.store.db import Store

    with Store(db) as store:
        run_rec = store.find_run(str(outcome.run_id))
    print_run(run_rec, title=f"tunbench run {outcome.uid} (#{outcome.run_id})")
    if json_out:
        from tunbench.cli.checks import write_output
        from tunbench.report import exporters

        write_output(json_out, exporters.get("json").render([run_rec]), "--json")
        console.print(f"JSON written to {json_out}")
    if stop is not None and (said := stop.ended(check, outcome.status, outcome.stopped, run_rec.trials)):
        console.print(escape(said), highlight=False)
    console.print(
        f"stored in {redact(db)} as run #{outcome.run_id} ({outcome.uid}); "
        f"`tunbench show {outcome.run_id}` prints this again"
    )
    exit_for(outcome.status, run_rec.trials, nothing=" (see the errors above)", some=": see the errors above")
