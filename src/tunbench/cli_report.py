"""`tunbench compare` and `tunbench report`: thin commands over report/compare.py and the exporters.

The exporters are pure (`render(runs) -> str`, one file per format in report/); this module is the only
one that writes their output (hyperfine's ExportManager).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from tunbench.results import RunRecord

console = Console()
err_console = Console(stderr=True)

DbOpt = Annotated[Path, typer.Option("--db", help="Result store (SQLite).", envvar="TUNBENCH_DB")]
DEFAULT_DB = Path("tunbench.db")

FORMATS = ("html", "md", "csv", "bmf", "json")
_SUFFIX_FORMAT = {".html": "html", ".htm": "html", ".md": "md", ".csv": "csv", ".json": "json"}


def _renderer(fmt: str) -> Callable[[list[RunRecord]], str]:
    if fmt == "html":
        from tunbench.report import html

        return html.render
    if fmt == "md":
        from tunbench.report import markdown

        return markdown.render
    if fmt == "csv":
        from tunbench.report import csv_export

        return csv_export.render
    if fmt == "bmf":
        from tunbench.report import bmf

        return bmf.render
    return _render_json


def _render_json(runs: list[RunRecord]) -> str:
    from tunbench.report.compare import CompareError
    from tunbench.report.json_export import render

    if len(runs) != 1:
        raise CompareError("--format json exports one run at a time (the format holds one run)")
    return render(runs[0])


def _pick_format(fmt: str | None, output: Path | None) -> str:
    from tunbench.report.compare import CompareError

    if fmt is None:
        return _SUFFIX_FORMAT.get(output.suffix.lower(), "html") if output else "html"
    if fmt not in FORMATS:
        raise CompareError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    return fmt


def compare_cmd(
    a: Annotated[str, typer.Argument(metavar="A", help="Baseline: run id, uid or name, or a JSON export file.")],
    b: Annotated[
        str | None,
        typer.Argument(metavar="[B]", help="Candidate: run or JSON file (default: A itself, with --label-a/-b)."),
    ] = None,
    label_a: Annotated[
        str | None, typer.Option("--label-a", help="Compare only this tunnel label on the A side.")
    ] = None,
    label_b: Annotated[
        str | None, typer.Option("--label-b", help="...against this label on the B side (e.g. old vs new build).")
    ] = None,
    threshold: Annotated[
        str,
        typer.Option(
            "--threshold",
            help="Smallest relative change that counts, e.g. 3% or 0.03 (default: 0). Not applied to absolute "
            "comparisons (signed metrics such as the latency increase, or data with values <= 0).",
        ),
    ] = "0",
    threshold_ms: Annotated[
        float,
        typer.Option(
            "--threshold-ms",
            min=0.0,
            help="Smallest absolute change that counts for metrics compared in ms, e.g. 0.5 (default: 0).",
        ),
    ] = 0.0,
    metrics: Annotated[
        str, typer.Option("--metrics", help="Metric kinds to compare and gate on: throughput,cpu,latency.")
    ] = "throughput,cpu,latency",
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Compare B to A per matching case: change of the median with a distribution-free CI and its real
    coverage, rank-test p-value (raw and Holm-adjusted), verdict, MDE.

    Changes are relative (median(B) / median(A) - 1), except for signed metrics (latency increase under
    load) and data with a value <= 0: those are absolute, median(B) - median(A) in the metric's unit, and
    take --threshold-ms instead of the relative --threshold. Verdicts use p-values Holm-adjusted across
    every comparison that gates: at most a 5% chance of any false regression in the whole comparison.

    Exit status: 0 = no regression, 1 = some case regressed beyond the threshold (significantly worse),
    2 = A or B could not be loaded or matched. Cases of the direct baseline are shown but do not gate.
    """
    from tunbench.report.compare import compare_lines, compare_runs, compare_table, load_run, parse_threshold

    kinds = _kinds(metrics)
    limit = parse_threshold(threshold)
    run_a = load_run(a, db)
    run_b = load_run(b, db) if b is not None else run_a
    result = compare_runs(
        run_a, run_b, label_a=label_a, label_b=label_b, threshold=limit, threshold_abs={"ms": threshold_ms},
        kinds=kinds,
    )  # fmt: skip
    table = compare_table(result)
    if console.is_terminal:
        console.print(table)
        for line in compare_lines(result):
            console.print(line)
    else:
        # Piped (CI logs, | tee): no terminal width to respect, and a table squeezed to 80 columns loses its
        # last columns (verdict, MDE). Print it at its natural width, and the lines unwrapped.
        # (Console.print(width=) can only narrow, so a console of that width does the printing.)
        natural = console.measure(table, options=console.options.update(width=10_000)).maximum
        wide = Console(width=max(console.width, natural))
        wide.print(table)
        for line in compare_lines(result):
            wide.print(line, soft_wrap=True)
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def _kinds(text: str) -> tuple[str, ...]:
    from tunbench.report.compare import METRIC_KINDS, CompareError

    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    bad = [k for k in kinds if k not in METRIC_KINDS]
    if bad or not kinds:
        raise CompareError(f"--metrics {text!r}: choose from {', '.join(METRIC_KINDS)}")
    return kinds


def report_cmd(
    runs: Annotated[
        list[str] | None,
        typer.Argument(metavar="[RUN]...", help="Runs (id, uid, name or JSON export file); default: the latest."),
    ] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="File to write (default: stdout).")] = None,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format", "-f", help="html, md, csv, bmf (bencher.dev) or json; default: from -o's suffix, else html."
        ),
    ] = None,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Write a report of one or more runs: a self-contained HTML page with plots, Markdown tables, CSV, BMF or JSON."""
    from tunbench.cli_checks import check_output_path, write_output
    from tunbench.report.compare import load_run

    if output is not None:
        check_output_path(output, "-o")  # before loading and rendering, not after
    kind = _pick_format(fmt, output)
    records = [load_run(ref, db) for ref in runs] if runs else [load_run("latest", db)]
    text = _renderer(kind)(records)
    if output is None:
        sys.stdout.write(text)
        return
    write_output(output, text, "-o")
    err_console.print(f"{kind} report written to {output.resolve()}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_cmd)
    app.command("report")(report_cmd)
