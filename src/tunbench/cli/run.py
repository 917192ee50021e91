"""`tunbench run`: flags -> scenario -> session (plan, checks, trials) -> the run's tables."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from tunbench.cli.console import console, err_console
from tunbench.cli.hosts import HostsOpt
from tunbench.cli.options import DEFAULT_DB, DbOpt
from tunbench.errors import EXIT_INTERRUPTED, EXIT_NOTHING_MEASURED, EXIT_TRIALS_FAILED


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


def run(
    scenario: Annotated[
        Path | None, typer.Argument(help="Scenario file (TOML). Default: the built-in scenario.")
    ] = None,
    tunnel: Annotated[
        list[str] | None,
        typer.Option(
            "--tunnel",
            "-t",
            help="Tunnel(s): NAME, NAME[key=value,...] or ./adapter.toml. Repeat or separate with commas.",
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
    direction: Annotated[str | None, typer.Option(help="up, down and/or bidir, comma-separated.")] = None,
    duration: Annotated[int | None, typer.Option(help="Seconds measured per trial (whole seconds).")] = None,
    omit: Annotated[int | None, typer.Option(help="Warm-up seconds excluded from the result.")] = None,
    repeat: Annotated[int | None, typer.Option(help="Repetitions per case (interleaved).")] = None,
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
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Resolve and validate everything, print the plan (cases, trials, estimated time) and exit; "
            "creates nothing, needs no root; missing programs are reported, not required.",
        ),
    ] = False,
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
    from tunbench import session
    from tunbench.cli.checks import check_output_dir, check_output_path, check_store_path
    from tunbench.cli.progress import RunProgress, graceful_signals
    from tunbench.cli.show import print_run
    from tunbench.config.load import load_scenario, with_overrides
    from tunbench.store.backend import redact
    from tunbench.store.db import Store

    sc, text, source = load_scenario(scenario)
    overrides: dict[str, dict[str, Any]] = {
        "run": {
            "tunnels": _split_tunnels(tunnel),
            "profiles": _split_profiles(profile),
            "repeat": repeat if repeat is not None else (5 if full else None),
            "direct": False if no_direct else None,
            "seed": seed,
            "name": name,
            "warm": warm,
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
    plan = session.prepare(sc, source, dry_run=dry_run, text=ref_text, flamegraphs=flamegraph, inventory=inventory)
    plan.commit, plan.branch = build
    if dry_run:
        console.print(f"dry run of {source}: nothing was created", highlight=False)
        for line in session.describe(plan):
            console.print(line, markup=False, highlight=False)
        for line in session.skipped_lines(plan):
            console.print(line, markup=False, highlight=False)
        for note in plan.notes:
            console.print(f"note: a real run would fail: {note}", markup=False, highlight=False)
        return
    for line in session.skipped_lines(plan):
        console.print(f"[yellow]{escape(line)}[/]")
    with graceful_signals(console), RunProgress(console, db) as progress:
        outcome = session.execute(
            plan, progress, scenario_text=text, db_path=db, flamegraph_dir=flamegraph_dir if flamegraph else None
        )
    with Store(db) as store:
        run_rec = store.find_run(str(outcome.run_id))
    print_run(run_rec, title=f"tunbench run {outcome.uid} (#{outcome.run_id})")
    if json_out:
        from tunbench.cli.checks import write_output
        from tunbench.report import exporters

        write_output(json_out, exporters.get("json").render([run_rec]), "--json")
        console.print(f"JSON written to {json_out}")
    console.print(
        f"stored in {redact(db)} as run #{outcome.run_id} ({outcome.uid}); "
        f"`tunbench show {outcome.run_id}` prints this again"
    )
    if outcome.status == "interrupted":
        err_console.print("[yellow]interrupted: finished trials are kept in the store[/]")
        raise typer.Exit(EXIT_INTERRUPTED)
    failed = sum(1 for t in run_rec.trials if t.status != "ok")
    if run_rec.trials and failed == len(run_rec.trials):
        err_console.print(f"[red]nothing measured: all {failed} trial(s) failed (see the errors above)[/]")
        raise typer.Exit(EXIT_NOTHING_MEASURED)
    if failed:
        err_console.print(f"[yellow]{failed} trial(s) failed (of {len(run_rec.trials)}): see the errors above[/]")
        raise typer.Exit(EXIT_TRIALS_FAILED)
