"""`tunbench import-flent`: Flent data files read and set beside a tunbench run's rrul trials, by the same
reader and rules (report/flent_compare.py); this reads the files, loads the run and prints the table."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tunbench.cli.console import console
from tunbench.cli.options import DEFAULT_DB, DbOpt

if TYPE_CHECKING:
    from rich.table import Table

    from tunbench.report.flent_compare import Row

WINDOWS_HELP = (
    "tunbench (default): the load's seconds only, as rrul's loaded p50/p99 (Flent's own files: its DELAY cut off "
    "each end); flent: every second, idle ones included, as `flent -f summary` without --data-cutoff."
)


def import_flent(
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE",
            help="Flent data files (.flent.gz, or their JSON), Flent's own or written by `tunbench export -f flent`.",
        ),
    ],
    run_ref: Annotated[
        str | None,
        typer.Option("--run", "-r", help="A run (id, uid, name or JSON export) whose rrul trials to set beside them."),
    ] = None,
    windows: Annotated[str, typer.Option("--windows", help=WINDOWS_HELP)] = "tunbench",
    ping: Annotated[
        str,
        typer.Option(
            "--ping",
            help="The ping series (default: unmarked UDP, the probe both tools send; a file of Flent's also has "
            "'Ping (ms) ICMP', 'Ping (ms) UDP EF', 'Ping (ms) UDP BK' and 'Ping (ms) avg').",
        ),
    ] = "Ping (ms) UDP BE",
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Read Flent's RRUL data files and print their loaded latency and goodput, beside a run's rrul trials.

    Each file and each rrul trial of --run is summarised with Flent's rules (the ping series' median and p99,
    each direction's mean goodput) in the same windows, one row each; with --run, each side's median and the
    ratio tunbench / Flent. Nothing is stored (docs/flent.md).
    """
    from tunbench.errors import ExportError
    from tunbench.report import flent_compare as fc
    from tunbench.report.compare import load_run
    from tunbench.report.exporters import flent

    if windows not in fc.WINDOWS:
        raise typer.BadParameter(f"{windows!r}: tunbench or flent", param_hint="--windows")
    mode: fc.Windows = "flent" if windows == "flent" else "tunbench"
    rows: list[Row] = []
    for path in files:
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ExportError(f"cannot read {path}: {e.strerror or e}") from None
        rows.append(fc.row(flent.read(data, str(path)), path.name, mode, ping))
    ours = fc.run_rows(load_run(run_ref, db), mode, ping) if run_ref is not None else []
    console.print(_table(rows, ours, mode, ping))


def _cell(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def _table(theirs: list[Row], ours: list[Row], windows: str, ping: str) -> Table:
    """The rows, each side's median when it has several, and the ratio line when both sides are there."""
    from rich.table import Table

    from tunbench.report import flent_compare as fc

    what = "the load's seconds" if windows == "tunbench" else "every second, idle included"
    table = Table(title=f"Flent's RRUL figures · windows {windows} ({what}) · {ping}", title_justify="left")
    table.add_column("source", overflow="fold")  # a long file name folds, the figures stay on one line
    for header in ("p50 ms", "p99 ms", "n", "up Mbit/s", "down Mbit/s"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("title", min_width=24)

    def add(r: Row, n: str | None = None) -> None:
        table.add_row(
            r.source, _cell(r.ping_p50_ms, 2), _cell(r.ping_p99_ms, 2), n or str(r.n), _cell(r.up_mbit),
            _cell(r.down_mbit), r.title,
        )  # fmt: skip

    medians: list[Row] = []
    for name, rows in (("Flent", theirs), ("tunbench", ours)):
        for r in rows:
            add(r)
        if rows:
            med = fc.median_row(rows, f"median, {name}")
            medians.append(med)
            if len(rows) > 1:
                add(med, "")
    if len(medians) == 2:
        p50, p99, up, down = fc.ratios(medians[1], medians[0])
        table.add_row("ratio tunbench / Flent", _cell(p50, 3), _cell(p99, 3), "", _cell(up, 3), _cell(down, 3), "")
    return table
