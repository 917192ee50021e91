"""The `tunbench` command line: one small function per subcommand; the work happens elsewhere."""

from __future__ import annotations

import logging
import re
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from tunbench import __version__
from tunbench.errors import EXIT_INTERRUPTED, EXIT_NOTHING_MEASURED, EXIT_TRIALS_FAILED, TunbenchError

app = typer.Typer(
    help="Reproducible performance tests for VPNs, tunnels and proxies, in hermetic network namespaces.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
# not a terminal (CI logs, pipes): rich would assume 80 columns and squeeze the tables
console = Console(width=None if sys.stdout.isatty() else max(120, shutil.get_terminal_size((120, 40)).columns))
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 120)

DbOpt = Annotated[Path, typer.Option("--db", help="Result store (SQLite).", envvar="TUNBENCH_DB")]
DEFAULT_DB = Path("tunbench.db")


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


@app.command()
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
    full: Annotated[bool, typer.Option("--full", help="5 repetitions of 10 s (default: the scenario's).")] = False,
    no_direct: Annotated[bool, typer.Option("--no-direct", help="Do not measure the direct baseline.")] = False,
    mtu: Annotated[int | None, typer.Option(help="Link MTU.")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed for trial order and emulated impairments.")] = None,
    name: Annotated[str | None, typer.Option(help="A name for this run (usable in show/export/compare).")] = None,
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
) -> None:
    """Measure tunnels: build namespaces, start each tunnel, push iperf3 traffic through it, record cost.

    Needs root (namespaces, cgroups), except with --dry-run.

    Exit status: 0 = every trial ok; 1 = an error stopped the run (not root, store, ...); 2 = invalid
    scenario, adapter, profile or flag; 3 = a program it needs is missing; 4 = the run finished but some
    trials failed; 5 = no trial measured anything; 130 = interrupted (finished trials are kept).
    """
    from tunbench.cli_checks import check_output_dir, check_output_path, check_store_path
    from tunbench.config.load import load_scenario, with_overrides
    from tunbench.report.summary import summarize_trials
    from tunbench.report.terminal import has_throughput_cases, summary_table, warning_lines, workload_tables
    from tunbench.session import describe, execute, plan_run, skipped_lines

    sc, text, source = load_scenario(scenario)
    overrides: dict[str, dict[str, Any]] = {
        "run": {
            "tunnels": _split_tunnels(tunnel),
            "profiles": _split_profiles(profile),
            "repeat": repeat if repeat is not None else (5 if full else None),
            "direct": False if no_direct else None,
            "seed": seed,
            "name": name,
        },
        "workload": {
            "kind": _csv(workload),
            "flows": _csv(flows, int),
            "directions": _csv(direction),
            "duration_s": 10 if full and duration is None else duration,
            "omit_s": omit,
        },
        "topology": {"mtu": mtu},
    }
    sc = with_overrides(sc, overrides)
    # outputs are checked before the run starts, not when it ends
    check_store_path(db)
    if json_out is not None:
        check_output_path(json_out, "--json")
    if flamegraph:
        check_output_dir(flamegraph_dir, "--flamegraph-dir")
    ref_text = text if tunnel is None and profile is None else ""  # errors in run.tunnels name the file's line
    if dry_run:
        plan = plan_run(sc, source, dry_run=True, text=ref_text)
        console.print(f"dry run of {source}: nothing was created", highlight=False)
        for line in describe(plan, sc):
            console.print(line, markup=False, highlight=False)
        for line in skipped_lines(plan):
            console.print(line, markup=False, highlight=False)
        for note in plan.notes:
            console.print(f"note: a real run would fail: {note}", markup=False, highlight=False)
        return
    outcome = execute(
        sc,
        scenario_text=text,
        source=source,
        db_path=db,
        console=console,
        flamegraph_dir=flamegraph_dir if flamegraph else None,
        ref_text=ref_text,
    )
    from tunbench.store.db import Store

    with Store(db) as store:
        run_rec = store.find_run(str(outcome.run_id))
    summaries = summarize_trials(run_rec.trials)
    if has_throughput_cases(summaries):
        console.print(summary_table(summaries, title=f"tunbench run {outcome.uid} (#{outcome.run_id})"))
    for table in workload_tables(run_rec.trials):
        console.print(table)
    for line in warning_lines(summaries):
        console.print(line)
    if json_out:
        from tunbench.cli_checks import write_output
        from tunbench.report.json_export import render

        write_output(json_out, render(run_rec), "--json")
        console.print(f"JSON written to {json_out}")
    console.print(
        f"stored in {db} as run #{outcome.run_id} ({outcome.uid}); `tunbench show {outcome.run_id}` prints this again"
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


@app.command()
def show(
    run_ref: Annotated[str | None, typer.Argument(metavar="[RUN]", help="Run id, uid or name (default: latest).")] = (
        None
    ),
    list_runs: Annotated[bool, typer.Option("--list", "-l", help="List the runs in the store.")] = False,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Print a stored run's table again (or list the runs)."""
    from rich.table import Table

    from tunbench.report.summary import summarize_trials
    from tunbench.report.terminal import has_throughput_cases, summary_table, warning_lines, workload_tables
    from tunbench.store.db import Store

    _need_db(db)
    with Store(db) as store:
        if list_runs:
            table = Table("id", "uid", "name", "started", "status", "trials", header_style="bold")
            for r in store.runs():
                table.add_row(
                    str(r.id), r.uid, r.name, r.started_at, r.status, str(len(store.trials(r.id, with_series=False)))
                )
            console.print(table)
            return
        run_rec = store.find_run(run_ref)
    summaries = summarize_trials(run_rec.trials)
    if has_throughput_cases(summaries):
        console.print(
            summary_table(
                summaries, title=f"tunbench run {run_rec.uid} (#{run_rec.id}, {run_rec.status}, {run_rec.started_at})"
            )
        )
    for table in workload_tables(run_rec.trials):
        console.print(table)
    for line in warning_lines(summaries):
        console.print(line)


@app.command()
def export(
    run_ref: Annotated[str | None, typer.Argument(metavar="[RUN]", help="Run id, uid or name (default: latest).")] = (
        None
    ),
    output: Annotated[Path | None, typer.Option("-o", "--output", help="File to write (default: stdout).")] = None,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Export a run as JSON (format: docs/json-format.md)."""
    from tunbench.cli_checks import check_output_path, write_output
    from tunbench.report.json_export import render
    from tunbench.store.db import Store

    if output:
        check_output_path(output, "-o")
    _need_db(db)
    with Store(db) as store:
        text = render(store.find_run(run_ref))
    if output:
        write_output(output, text, "-o")
        err_console.print(f"written to {output}")
    else:
        sys.stdout.write(text)


@app.command()
def tunnels() -> None:
    """List the built-in tunnel adapters, whether their programs are installed, and their versions."""
    from rich.table import Table

    from tunbench.tunnels.adapter import tunnel_version
    from tunbench.tunnels.registry import builtin_names, missing_binaries, parse_ref

    table = Table("tunnel", "layer", "status", "version", "parameters", "description", header_style="bold")
    for name in builtin_names():
        ref = parse_ref(name)
        miss = missing_binaries(ref)
        status = "[green]ready[/]" if not miss else f"[red]missing {', '.join(miss)}[/]"
        version = tunnel_version(ref) if not miss else ""
        params = ", ".join(f"{k}={v}" for k, v in ref.adapter.spec.params.items())
        table.add_row(name, ref.adapter.spec.layer, status, version, params, ref.adapter.spec.description)
    console.print(table)
    console.print("Your own adapter: `--tunnel ./my-vpn.toml` (format: docs/adapters.md).")


@app.command()
def workloads() -> None:
    """List the workload kinds (traffic generators) and their options."""
    from rich.table import Table

    from tunbench.workloads import REGISTRY

    table = Table(
        "workload", "axes", "tunnels", "options (\\[workload.KIND] in a scenario)", "description", header_style="bold"
    )
    for kind, w in sorted(REGISTRY.items()):
        opts = ", ".join(f"{name}={f.default!r}" for name, f in w.Options.model_fields.items()) or "–"
        table.add_row(kind, " × ".join(w.axes) or "–", "/".join(w.layers), opts, w.description)
    console.print(table)


@app.command()
def profiles() -> None:
    """List the built-in WAN profiles."""
    from rich.table import Table

    from tunbench.link.profile import builtin_names, find_profile

    table = Table("profile", "link", "up (client→server)", "down (server→client)", "description", header_style="bold")
    for name in builtin_names():
        p = find_profile(name)
        table.add_row(
            p.name, "emulated" if p.emulated else "veth", p.spec("up") or "–", p.spec("down") or "–", p.description
        )
    console.print(table)
    console.print("Your own: `--profile ./my.toml` or inline `--profile 'name:delay=20ms,rate=50mbit'`.")


@app.command()
def doctor() -> None:
    """Check kernel features, permissions and tools, and say what to install."""
    from tunbench.doctor import checks

    bad = 0
    for c in checks():
        mark = "[green]✓[/]" if c.ok else "[red]✗[/]"
        console.print(f"{mark} {c.name}: {c.detail}")
        if not c.ok:
            bad += 1
            if c.fix:
                console.print(f"    fix: {c.fix}")
    if bad:
        raise typer.Exit(1)


@app.command()
def clean(
    force: Annotated[bool, typer.Option("--force", help="Also remove objects of runs that are still alive.")] = False,
) -> None:
    """Remove namespaces, processes, cgroups and temp dirs left behind by crashed or killed runs."""
    from tunbench.clean import clean as do_clean

    rep = do_clean(force=force)
    if rep.empty():
        console.print("nothing to clean")
    else:
        console.print(
            f"removed: {len(rep.runs)} run ledger(s), {rep.processes} process(es), "
            f"{len(rep.namespaces)} namespace(s), {len(rep.cgroups)} cgroup(s), {len(rep.paths)} path(s)"
        )
    for uid in rep.skipped_live:
        console.print(f"[yellow]run {uid} is still running: left alone (use --force)[/]")


link_app = typer.Typer(
    help="The emulated WAN link on its own: a shell over it, and its self-test.", no_args_is_help=True
)
app.add_typer(link_app, name="link")


@link_app.command("shell", context_settings={"allow_interspersed_args": False})
def link_shell(
    command: Annotated[
        list[str] | None,
        typer.Argument(help="Command to run in the client namespace (default: $SHELL). Put it after --."),
    ] = None,
    profile: Annotated[str, typer.Option(help="WAN profile (name, file, or inline NAME:delay=20ms,...).")] = "wan-50ms",
    server_cmd: Annotated[
        str | None,
        typer.Option(
            "--server-cmd",
            help="Command to run in the server namespace while the client command runs (e.g. 'iperf3 -s').",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for the emulator's random impairments.")] = 1,
) -> None:
    """Run a command over an emulated WAN link: client namespace -> tunbench-link -> server namespace.

    The command sees TUNBENCH_PEER (the server side's address). Example:
    tunbench link shell --profile wan-50ms --server-cmd 'iperf3 -s' -- sh -c 'iperf3 -c $TUNBENCH_PEER'
    """
    import shlex

    from tunbench.link.profile import find_profile, validate_with_link
    from tunbench.link.shell import run_shell

    prof = find_profile(profile)
    validate_with_link(prof)
    status = run_shell(prof, command or [], shlex.split(server_cmd) if server_cmd else None, seed=seed)
    raise typer.Exit(status)


@link_app.command("selftest")
def link_selftest(
    quick: Annotated[bool, typer.Option("--quick", help="Shorter measurements (about 1 minute).")] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the numbers as JSON.")] = None,
    seed: Annotated[int, typer.Option(help="Seed for the emulated loss.")] = 1,
) -> None:
    """Measure the emulator against its targets: passthrough throughput vs veth, delay error idle and
    loaded, rate accuracy (10 Mbit/s - 1 Gbit/s), Bernoulli and Gilbert-Elliott loss."""
    import dataclasses
    import json

    from tunbench.link.emulator import find_link_binary
    from tunbench.link.selftest import Result, run_selftest

    find_link_binary()

    def report(r: Result) -> None:
        mark = {True: "[green]PASS[/]", False: "[red]FAIL[/]", None: "[blue]INFO[/]"}[r.passed]
        console.print(f"{mark} {r.name}: {r.detail}", highlight=False)

    results = run_selftest(seed=seed, quick=quick, report=report)
    if json_out:
        json_out.write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=2) + "\n")
    failed = [r.name for r in results if r.passed is False]
    console.print(
        f"{len(results) - len(failed)}/{len(results)} within bounds"
        + (f"; missed: {', '.join(failed)}" if failed else "")
    )
    if failed:
        raise typer.Exit(1)


def _need_db(db: Path) -> None:
    if not db.exists():
        raise TunbenchError(f"no result store at {db} (run `tunbench run` first, or pass --db PATH)")


def version_callback(value: bool) -> None:
    if value:
        console.print(f"tunbench {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=version_callback, is_eager=True, help="Print the version and exit.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log what tunbench does.")] = False,
) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(message)s")


def _register_extensions() -> None:
    """Subcommands that live in their own modules (reports and comparisons)."""
    from tunbench import cli_report

    cli_report.register(app)


_register_extensions()


def main() -> None:
    try:
        app()
    except TunbenchError as e:
        err_console.print(f"Error: {e}", highlight=False, markup=False, soft_wrap=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(EXIT_INTERRUPTED)
