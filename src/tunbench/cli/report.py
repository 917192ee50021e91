"""`tunbench report` and its alias `tunbench export`: thin commands over the exporters (report/exporters/)
(`tunbench compare` is cli/compare.py).

The exporters are pure (`render(runs)`, one file per format); `write_report` here is the only code that
writes their output, to a file or to stdout (hyperfine's ExportManager).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from tunbench.cli.console import err_console
from tunbench.cli.options import DEFAULT_DB, DbOpt, RunArg

OutputOpt = Annotated[Path | None, typer.Option("-o", "--output", help="File to write (default: stdout).")]


def write_report(refs: list[str], fmt: str | None, output: Path | None, db: str | Path) -> None:
    """Load the runs (ids, uids, names or JSON export files; none = the latest), render them with the
    exporter `fmt` names (or `output`'s suffix does), and write the result to `output` or stdout."""
    from tunbench.cli.checks import check_output_path, write_output
    from tunbench.report import exporters
    from tunbench.report.compare import load_run

    if output is not None:
        check_output_path(output, "-o")  # before loading and rendering, not after
    exporter = exporters.pick(fmt, output)
    records = [load_run(ref, db) for ref in refs or ["latest"]]
    data = exporter.render(records)
    if output is None:
        if isinstance(data, bytes):
            sys.stdout.buffer.write(data)
        else:
            sys.stdout.write(data)
        return
    write_output(output, data, "-o")
    err_console.print(f"{exporter.name} report written to {output.resolve()}", highlight=False)


def report(
    runs: Annotated[
        list[str] | None,
        typer.Argument(metavar="RUN", help="Runs (id, uid, name or JSON export file); default: the latest."),
    ] = None,
    output: OutputOpt = None,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format", "-f", help="html, md, csv, bmf (bencher.dev) or json; default: from -o's suffix, else html."
        ),
    ] = None,
    history: Annotated[
        bool,
        typer.Option(
            "--history",
            help="Instead of runs: the history of one machine as an HTML page, each case's series with its CI band "
            "and change points (see `tunbench history`).",
        ),
    ] = False,
    machine: Annotated[
        str | None,
        typer.Option("--machine", help="With --history: the machine (default: that of the latest finished run)."),
    ] = None,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Write a report of one or more runs: a self-contained HTML page with plots, Markdown tables, CSV, BMF or JSON.

    With --history: an HTML page of the history of one machine instead (no RUN arguments).
    """
    if history:
        from tunbench.cli.history import history_report
        from tunbench.report.history import HistoryError

        if runs:
            raise HistoryError("--history draws every run of one machine: give no RUN arguments")
        if fmt not in (None, "html") or (output is not None and output.suffix.lower() not in (".html", ".htm", "")):
            raise HistoryError("--history writes HTML only (--format html, -o FILE.html)")
        history_report(output, machine, db)
        return
    if machine is not None:
        from tunbench.report.history import HistoryError

        raise HistoryError("--machine applies to --history only")
    write_report(runs or [], fmt, output, db)


def write_flent(refs: list[str], output: Path, db: str | Path) -> None:
    """Every rrul trial of the runs as Flent's data file: into the directory `output` (made if missing),
    one file per trial, or into the one file `output` (a name ending in .gz) when there is one trial."""
    from tunbench.cli.checks import check_output_dir, write_output
    from tunbench.report.compare import load_run
    from tunbench.report.exporters.flent import FlentExporter

    if output.suffix.lower() == ".gz" and not output.is_dir():
        write_report(refs, "flent", output, db)
        return
    check_output_dir(output, "-o")
    records = [load_run(ref, db) for ref in refs or ["latest"]]
    files = FlentExporter().files(records)
    for name, data in files.items():
        write_output(output / name, data, "-o")
    err_console.print(f"{len(files)} Flent data file(s) written to {output.resolve()}", highlight=False)


def export(
    run_ref: RunArg = None,
    output: OutputOpt = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="json (docs/json-format.md) or flent: each rrul trial as Flent's .flent.gz, into the directory -o "
            "names (or the one file -o FILE.flent.gz).",
        ),
    ] = "json",
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Export a run as JSON (format: docs/json-format.md), or its rrul trials in Flent's data format.

    `tunbench export RUN` is the same as `tunbench report --format json RUN`; `--format flent -o DIR` writes
    one .flent.gz per rrul trial, which `flent -i FILE` reads and plots (docs/workloads.md, rrul).
    """
    refs = [run_ref] if run_ref is not None else []
    if fmt == "flent":
        if output is None:
            raise typer.BadParameter("Flent's data files are written to -o DIR (or -o FILE.flent.gz)", param_hint="-o")
        write_flent(refs, output, db)
        return
    if fmt != "json":
        raise typer.BadParameter(f"{fmt!r}: json or flent (the other formats: tunbench report)", param_hint="--format")
    write_report(refs, "json", output, db)
