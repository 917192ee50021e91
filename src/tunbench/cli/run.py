"""`tunbench run`: flags -> scenario -> session (plan, checks, trials) -> the run's tables."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from tunbench.cli.console import console
from tunbench.cli.hosts import HostsOpt
from tunbench.cli.options import (
    DEFAULT_DB,
    CpusetOpt,
    DbOpt,
    GateOpt,
    gate_flag,
    parse_budget,
    parse_share,
    parse_until,
)
from tunbench.cli.outcome import exit_for


def _csv(value: str | None, cast: type = str) -> list | None:  # type: ignore[type-arg]
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    try:
        return [cast(v) for v in items]
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a comma-separated list of {cast.__name__}") from None


def _split_tunnels(values: list[str] | None) -> list[str] | None:
    """`--tunnel a,b` or repeated `--tunnel`; commas inside [...] belong to the parameters."""
    if not values:
        return None
    out: list[str] = []
    for v in values:
        depth, cur = 0, ""
        for ch in v:
            depth += ch == "["
            depth -= ch == "]"
            if ch == "," and depth == 0:
                out.append(cur.strip())
                cur = ""
            else:
                cur += ch
        if cur.strip():
            out.append(cur.strip())
    return out


def _build_id(value: str | None, flag: str) -> str:
    """A commit or branch as given, or "" when not given; refused if empty or with whitespace."""
    if value is None:
        return ""
    if not value.strip() or any(ch.isspace() for ch in value):
        raise typer.BadParameter(f"{value!r}: expected one word (no spaces)", param_hint=flag)
    return value


def _family(value: str | None, flag: str) -> str | None:
    """`--ip 6` / `--overlay ipv6` -> "ipv6" (the scenario's [topology] underlay / overlay)."""
    if value is None:
        return None
    family = {"4": "ipv4", "6": "ipv6", "ipv4": "ipv4", "ipv6": "ipv6"}.get(value.strip().lower())
    if family is None:
        raise typer.BadParameter(f"{value!r}: expected 4 or 6", param_hint=flag)
    return family


_INLINE_ITEM = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_.]*\s*=")


def _split_profiles(values: list[str] | None) -> list[str] | None:
    """`--profile lan,wan-50ms` or repeated `--profile`; an inline profile keeps its own commas: after
    `NAME:key=value`, a comma followed by `key=...` continues it (`dsl:delay=15ms,up.rate=1mbit,lan`)."""
    if not values:
        return None
    out: list[str] = []
    for v in values:
        inline = False
        for part in v.split(","):
            if inline and _INLINE_ITEM.match(part):
                out[-1] += "," + part.strip()
            elif part.strip():
                out.append(part.strip())
                inline = ":" in part
    return out


def _precision_flags(
    target: str | None, budget: str | None, until: str | None = None
) -> tuple[float | None, float | None]:
    """(--target-mde as a fraction, --budget (or the time left --until) in seconds), each None when not
    given; bad values name the flag."""
    if budget is not None and until is not None:
        raise typer.BadParameter("give --budget or --until, not both", param_hint="--until")
    budget_s = parse_budget(budget) if budget is not None else parse_until(until) if until is not None else None
    if target is None:
        return None, budget_s
    goal = parse_share(target, "--target-mde")
    if budget_s is None:
        raise typer.BadParameter(
            f"{target!r} needs --budget (or --until): the most wall time the run may take to reach it (e.g. "
            "--budget 2m, or --until 14:30)",
            param_hint="--target-mde",
        )
    return goal, budget_s


def _percent(text: str | None, flag: str) -> float | None:
    """'5%' (or the fraction 0.05) -> 5.0 percent, None when not given; a bad value names the flag."""
    return None if text is None else 100.0 * parse_share(text, flag)


def _target_labels(plan: Any) -> tuple[str, str]:
    """The two tunnel labels a --target-mde run compares (besides direct, which never gates)."""
    labels = [r.label for r in plan.refs if r.name != "direct"]
    if len(labels) != 2:
        raise typer.BadParameter(
            f"needs exactly two tunnels (labels) to compare as pairs, e.g. -t 'wireguard-go[label=a]' "
            f"-t 'wireguard-go[label=b]'; this run has {len(labels)}: {', '.join(labels) or 'none'}",
            param_hint="--target-mde",
        )
    return labels[0], labels[1]


def _stop_check(
    goal: float | None, labels: tuple[str, ...], budget_s: float | None, started: float, gate: Any = None
) -> Any:
    """--target-mde: a PrecisionStop with the budget as its fallback; --budget alone: the deadline."""
    from tunbench.report.compare import Gate
    from tunbench.report.precision import PrecisionStop
    from tunbench.runner import Deadline

    if budget_s is None:
        return None
    deadline = Deadline(started + budget_s, min_blocks=2)
    if goal is None:
        return deadline
    return PrecisionStop(labels[0], labels[1], goal, budget=deadline, gate=gate or Gate())


def _stop_plan(goal: float | None, budget: str | None, plan: Any, gate: Any = None) -> str:
    from tunbench.report.compare import Gate

    reps = plan.scenario.run.repeat
    if goal is None:
        return f"budget {budget}: repetitions until it is spent, at most {reps}"
    gate = gate or Gate()
    tiers = (
        "every gated comparison (--gate all)"
        if gate.name == "all"
        else f"the tunnel's CPU/bit delivered (--gate cost; throughput's, the wire overhead's and each side's "
        f"at most ±{gate.threshold('wide', goal):.1%})"
    )
    return (
        f"target ±{goal:.1%}".replace(".0%", "%") + f" within {budget}: pairs until the largest paired MDE of "
        f"{tiers} is at most the target (never on significance), at most {reps}"
    )


def _what_runs(source: str, tunnel: list[str] | None, profile: list[str] | None, workload: str | None) -> str:
    """The header's name for what the dry run plans: the scenario, and which of its parts the flags replaced
    ('<default scenario>, its tunnels from -t')."""
    replaced = [
        part for part, flag in (("tunnels from -t", tunnel), ("profiles from --profile", profile),
                                ("workloads from -w", workload)) if flag
    ]  # fmt: skip
    return source + (f", its {', '.join(replaced)}" if replaced else "")


def _stop_lines(goal: float | None, budget: str, budget_s: float, plan: Any, gate: Any) -> list[str]:
    """What the dry run says of a run that stops at a budget: its stop rule and, where the target needs more
    pairs than fit in the budget at the plan's estimate, a warning: the run would then always stop at the
    budget, never on its target."""
    from tunbench import session
    from tunbench.report.precision import MIN_STOP_PAIRS

    lines = [f"stop: {_stop_plan(goal, budget, plan, gate)}"]
    if goal is None:
        return lines
    fit = session.rounds_within(plan, budget_s)
    if fit < MIN_STOP_PAIRS:
        per_round = plan.total_s / max(1, plan.scenario.run.repeat)
        need = math.ceil(MIN_STOP_PAIRS * per_round / 60.0)
        lines.append(
            f"warning: the stop needs at least {MIN_STOP_PAIRS} pairs per case, and about {fit} fit in the budget "
            f"({budget}) at the estimate of each trial: this run cannot stop on its target and will end at the "
            f"budget; give --budget {need}m or more, or shorter trials (--duration, --omit)"
        )
    return lines


INSTRUCTIONS_RATE = "20mbit"
"""The offered rate of iperf3 when instructions are counted and the scenario sets none: under callgrind
wireguard-go carried about 38 Mbit/s on this project's VM, so both builds of an A/B sustain it."""


def _instructions_rate(sc: Any) -> Any:
    """With count_instructions, iperf3 at a fixed offered rate (the scenario's, else INSTRUCTIONS_RATE): the
    count per byte then does not depend on how fast each build goes."""
    from tunbench.config.load import with_overrides

    if not sc.run.count_instructions or "iperf3" not in sc.workload.kind:
        return sc
    current = dict(getattr(sc.workload, "iperf3", None) or {})
    if current.get("rate"):
        return sc
    return with_overrides(sc, {"workload": {"iperf3": {**current, "rate": INSTRUCTIONS_RATE}}})


def _precision_listener(progress: Any, budget_s: float | None, started: float) -> Any:
    import time

    from tunbench.report.precision import status_text

    def show(p: Any) -> None:
        left = max(0.0, (budget_s or 0.0) - (time.monotonic() - started))
        progress.note(f"{status_text(p)} · {left:.0f} s of the budget left")

    return show


def run(
    scenario: Annotated[
        Path | None, typer.Argument(help="Scenario file (TOML). Default: the built-in scenario.")
    ] = None,
    tunnel: Annotated[
        list[str] | None,
        typer.Option(
            "--tunnel",
            "-t",
            help="Tunnel(s): NAME, NAME[key=value,...] or ./adapter.toml. Repeat or separate with commas. A "
            "relative path in bin= (a build, e.g. bin=./wireguard-go) is taken from the directory tunbench was "
            "started in (from a scenario file's own directory for the file's tunnels).",
        ),
    ] = None,
    profile: Annotated[
        list[str] | None,
        typer.Option(
            help="WAN profile(s): NAME, ./profile.toml or inline 'NAME:delay=15ms,up.rate=1mbit,...' "
            "(see `tunbench profiles`). Repeat or separate with commas.",
        ),
    ] = None,
    workload: Annotated[
        str | None,
        typer.Option("--workload", "-w", help="Workload kind(s), comma-separated (see `tunbench workloads`)."),
    ] = None,
    flows: Annotated[str | None, typer.Option(help="Parallel TCP flows, e.g. 1,2,10.")] = None,
    direction: Annotated[
        str | None,
        typer.Option(
            help="up, down and/or bidir, comma-separated. Default: the scenario's (the built-in one: up,down; "
            "a scenario file without [workload] directions: up)."
        ),
    ] = None,
    duration: Annotated[
        int | None,
        typer.Option(
            help="Seconds measured per trial (whole seconds), after the --omit warm-up. Default: the scenario's "
            "(the built-in one: 3; a scenario file without [workload] duration_s: 10)."
        ),
    ] = None,
    omit: Annotated[
        int | None,
        typer.Option(
            help="Warm-up seconds at the start of each trial's traffic, excluded from the result. Default: the "
            "scenario's (the built-in one: 1; a scenario file without [workload] omit_s: 1)."
        ),
    ] = None,
    repeat: Annotated[
        int | None,
        typer.Option(
            help="Repetitions per case (interleaved). Default: the scenario's (the built-in one: 3; a scenario "
            "file without [run] repeat: 3)."
        ),
    ] = None,
    warm: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=100,
            help="Warm alternation: bring each block's tunnels up once for this many rounds and measure each "
            "round as a window on the running tunnels (A B B A ..., no set-up between windows); 1 = a fresh "
            "bring-up per trial ([run] warm).",
        ),
    ] = None,
    redo_steal: Annotated[
        str | None,
        typer.Option(
            "--redo-steal",
            help="Measure a trial again when the hypervisor took at least this share of the CPUs' time during "
            "its window (steal), e.g. 5%; at most 5 attempts in all ([run] redo_steal_pct). Default: keep it, "
            "flagged.",
        ),
    ] = None,
    redo_interfered: Annotated[
        bool,
        typer.Option(
            "--redo-interfered",
            help="Measure a trial again when its window was interfered with: another tunbench run was live, "
            "foreign CPU reached --foreign-cpu, or steal reached 5% (or --redo-steal); at most 5 attempts in "
            "all, the reason kept ([run] redo_interfered). Default: keep it, flagged.",
        ),
    ] = False,
    foreign_cpu: Annotated[
        str | None,
        typer.Option(
            "--foreign-cpu",
            help="A window counts as interfered when processes that are neither this run's nor the kernel's "
            "used at least this much CPU during it, in % of one core, e.g. 10% ([run] foreign_cpu_pct; "
            "default 10%).",
        ),
    ] = None,
    full: Annotated[bool, typer.Option("--full", help="5 repetitions of 10 s (default: the scenario's).")] = False,
    no_direct: Annotated[bool, typer.Option("--no-direct", help="Do not measure the direct baseline.")] = False,
    mtu: Annotated[int | None, typer.Option(help="Link MTU.")] = None,
    ip: Annotated[
        str | None,
        typer.Option("--ip", help="4 or 6: the IP family tunnels run over (the scenario's [topology] underlay)."),
    ] = None,
    overlay: Annotated[
        str | None,
        typer.Option(help="4 or 6: the IP family L3 tunnels carry inside ([topology] overlay)."),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed for trial order and emulated impairments.")] = None,
    name: Annotated[str | None, typer.Option(help="A name for this run (usable in show/export/compare).")] = None,
    commit: Annotated[
        str | None,
        typer.Option(
            help="The commit of the build under test, recorded in the run's provenance for `tunbench history` "
            "(per tunnel: commit=SHA among the tunnel's parameters).",
        ),
    ] = None,
    branch: Annotated[str | None, typer.Option(help="The branch of that build, recorded with the commit.")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the JSON export here.")] = None,
    flamegraph: Annotated[
        bool,
        typer.Option(
            "--flamegraph",
            help="Record perf flamegraphs (SVG) of the tunnel's client and server processes during each "
            "measurement, stored with the trial and written to --flamegraph-dir. (Not --profile: that "
            "option selects WAN profiles.)",
        ),
    ] = False,
    flamegraph_dir: Annotated[
        Path, typer.Option("--flamegraph-dir", help="Where --flamegraph writes the SVGs.")
    ] = Path("results/flamegraphs"),
    count_work: Annotated[
        bool,
        typer.Option(
            "--count-work",
            help="Count each side's syscalls, context switches, CPU migrations and page faults over each "
            "measured window with perf stat, and their ratios per MB and per packet (docs/counted-work.md; "
            "[run] count_work). Off by default: it costs throughput (a quarter of wireguard-go's on a 2-vCPU VM, "
            "docs/benchmarks/counted-work.md).",
        ),
    ] = False,
    count_instructions: Annotated[
        bool,
        typer.Option(
            "--count-instructions",
            help="Count the tunnel's own instructions per role over each trial with valgrind's callgrind, per "
            "payload byte delivered ('instructions/byte'): a cost figure the box's noise does not reach, which "
            "the cost gate then holds in place of the CPU time (docs/work-gate.md; [run] count_instructions). "
            "The daemons run under valgrind, many times slower, so iperf3 offers a fixed rate both builds "
            f"sustain ({INSTRUCTIONS_RATE} unless the scenario's [workload.iperf3] rate says otherwise). A role "
            "that cannot be counted (a kernel tunnel, a remote host, no valgrind) says why.",
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Resolve and validate everything, print the plan (cases, trials, estimated time) and exit; "
            "creates nothing, needs no root; missing programs are reported, not required.",
        ),
    ] = False,
    target_mde: Annotated[
        str | None,
        typer.Option(
            "--target-mde",
            help="Stop once the paired comparison of the run's two tunnel labels can detect this change, e.g. "
            "3%: the largest MDE of the gated comparisons (--gate cost: the tunnel's CPU per bit delivered, "
            "client and server together) at most this, and the wide tier's (throughput, the wire overhead, each "
            "side's CPU per bit) at most twice this, with at least 10 pairs. Needs --budget and exactly two "
            "tunnels (labels) besides direct; --repeat is then the "
            "upper bound (default: as many pairs as the budget could hold). Stops on precision, never on "
            "significance. Places each side on a CPU of its own (--cpuset split) unless --cpuset or the "
            "scenario says otherwise.",
        ),
    ] = None,
    budget: Annotated[
        str | None,
        typer.Option(
            "--budget",
            help="Wall time for the whole run, e.g. 2m: a block (a pair) starts only if, at the pace so far, it "
            "ends within it; the run then stops between blocks, done, with whole pairs.",
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            help="As --budget, given as the local time the run must end by: 14:30 (the next 14:30) or "
            "2026-11-24T14:30.",
        ),
    ] = None,
    cpuset: CpusetOpt = None,
    gate: GateOpt = "cost",
    db: DbOpt = DEFAULT_DB,
    hosts: HostsOpt = None,
) -> None:
    """Measure tunnels: build namespaces, start each tunnel, push iperf3 traffic through it, record cost.

    Needs root (namespaces, cgroups), except with --dry-run. With --hosts, the client and server roles run on
    the inventory's hosts (reached with `ssh`, each running `tunbench agent`) instead of local namespaces.

    Exit status: 0 = every trial ok; 1 = an error stopped the run (not root, store, ...); 2 = invalid
    scenario, adapter, profile or flag; 3 = a program it needs is missing; 4 = the run finished but some
    trials failed; 5 = no trial measured anything; 130 = interrupted (finished trials are kept).
    """
    import time

    from tunbench import session
    from tunbench.cli.checks import check_output_dir, check_output_path, check_store_path
    from tunbench.cli.progress import RunProgress, graceful_signals
    from tunbench.cli.show import print_run
    from tunbench.config.load import load_scenario, with_overrides
    from tunbench.store.backend import redact
    from tunbench.store.db import Store

    started = time.monotonic()  # --budget counts from here
    goal, budget_s = _precision_flags(target_mde, budget, until)
    tiers = gate_flag(gate)
    if until is not None:
        budget = f"until {until}"  # how the plan and the stop name it
    sc, text, source = load_scenario(scenario)
    if goal is not None and cpuset is None and "cpuset" not in sc.run.model_fields_set and not (hosts or sc.hosts):
        # an A/B comparison places its sides, as calibrate does: without it, A/A comparisons here gave false
        # verdicts at 7.8% (7 of 90), with it 1.4% (1 of 72) (docs/precision.md, docs/benchmarks/precision.md);
        # --cpuset off
        from tunbench.cli.calibrate import default_cpuset

        cpuset = default_cpuset()
    overrides: dict[str, dict[str, Any]] = {
        "run": {
            "tunnels": _split_tunnels(tunnel),
            "profiles": _split_profiles(profile),
            "repeat": repeat if repeat is not None else (5 if full else None),
            "direct": False if no_direct else None,
            "seed": seed,
            "name": name,
            "warm": warm,
            "redo_steal_pct": _percent(redo_steal, "--redo-steal"),
            "redo_interfered": True if redo_interfered else None,
            "count_work": True if count_work else None,
            "count_instructions": True if count_instructions else None,
            "foreign_cpu_pct": _percent(foreign_cpu, "--foreign-cpu"),
            "cpuset": cpuset,
        },
        "workload": {
            "kind": _csv(workload),
            "flows": _csv(flows, int),
            "directions": _csv(direction),
            "duration_s": 10 if full and duration is None else duration,
            "omit_s": omit,
        },
        "topology": {"mtu": mtu, "underlay": _family(ip, "--ip"), "overlay": _family(overlay, "--overlay")},
    }
    sc = with_overrides(sc, overrides)
    sc = _instructions_rate(sc)
    # outputs are checked before the run starts, not when it ends
    check_store_path(db, connect=not dry_run)
    if json_out is not None:
        check_output_path(json_out, "--json")
    if flamegraph:
        check_output_dir(flamegraph_dir, "--flamegraph-dir")
    ref_text = text if tunnel is None and profile is None else ""  # errors in run.tunnels name the file's line
    build = _build_id(commit, "--commit"), _build_id(branch, "--branch")
    inventory = None
    if hosts is not None:  # --hosts wins over a scenario's [hosts] table
        from tunbench.remote.inventory import load_inventory

        inventory = load_inventory(hosts)
    elif sc.hosts:
        from tunbench.remote.inventory import inventory_from_table

        inventory = inventory_from_table(sc.hosts, source, text=text)
    # with a budget and no --repeat, the plan is the upper bound: as many rounds as could fit
    sized = session.Budget(budget_s, budget or "") if budget_s is not None and repeat is None and not full else None
    plan = session.prepare(
        sc,
        source,
        dry_run=dry_run,
        text=ref_text,
        flamegraphs=flamegraph,
        inventory=inventory,
        budget=sized,
        build=build,
    )
    labels = _target_labels(plan) if goal is not None else ()
    if dry_run:
        console.print(
            f"dry run of {_what_runs(source, tunnel, profile, workload)}: nothing was created", highlight=False
        )
        for line in session.describe(plan, (budget_s, budget or "") if budget_s is not None else None):
            console.print(line, markup=False, highlight=False)
        if budget_s is not None:
            for line in _stop_lines(goal, budget or "", budget_s, plan, tiers):
                console.print(line, markup=False, highlight=False)
        for line in session.skipped_lines(plan):
            console.print(line, markup=False, highlight=False)
        for note in plan.notes:
            console.print(f"note: a real run would fail: {note}", markup=False, highlight=False)
        return
    for line in session.skipped_lines(plan):
        console.print(f"[yellow]{escape(line)}[/]")
    stop = _stop_check(goal, labels, budget_s, started, tiers)
    precise = stop if goal is not None else None  # a report.precision.PrecisionStop
    if stop is not None:
        console.print(_stop_plan(goal, budget, plan, tiers), highlight=False)
    with graceful_signals(console), RunProgress(console, db) as progress:
        if precise is not None:
            precise.listener = _precision_listener(progress, budget_s, started)
        outcome = session.execute(
            plan,
            progress,
            scenario_text=text,
            db_path=db,
            flamegraph_dir=flamegraph_dir if flamegraph else None,
            stop=stop,
        )
    with Store(db) as store:
        run_rec = store.find_run(str(outcome.run_id))
    print_run(run_rec, title=f"tunbench run {outcome.uid} (#{outcome.run_id})")
    if json_out:
        from tunbench.cli.checks import write_output
        from tunbench.report import exporters

        write_output(json_out, exporters.get("json").render([run_rec]), "--json")
        console.print(f"JSON written to {json_out}")
    if precise is not None and outcome.status == "done":
        from tunbench.report.precision import stop_text

        final = precise.measure(run_rec.trials)
        by = "target" if final.reached else precise.by or "plan"
        console.print(escape(stop_text(final, by)), highlight=False)
    elif outcome.stopped:
        console.print(f"stopped at the budget ({budget}): {escape(outcome.stopped)}", highlight=False)
    console.print(
        f"stored in {redact(db)} as run #{outcome.run_id} ({outcome.uid}); "
        f"`tunbench show {outcome.run_id}` prints this again"
    )
    exit_for(outcome.status, run_rec.trials, nothing=" (see the errors above)", some=": see the errors above")
