"""`tunbench history`: each case's metrics over the runs of one machine, with change points; a CI gate with
--fail-on-regression-since (report/history.py does the work)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from tunbench.cli.console import console, err_console
from tunbench.cli.options import DEFAULT_DB, DbOpt

if TYPE_CHECKING:
    from tunbench.report.history import History, Series

MachineOpt = Annotated[
    str | None,
    typer.Option(
        "--machine",
        help="Machine id (or a unique prefix of it, or its host name); default: the machine of the latest "
        "finished run. Runs of other machines are never mixed in.",
    ),
]
TunnelOpt = Annotated[
    list[str] | None, typer.Option("--tunnel", "-t", help="Only this tunnel label (repeat for more).")
]
MetricOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--metric",
        "-m",
        help="throughput_bps, cpu_s_per_bit.client, cpu_s_per_bit.server, a latency.*_ms metric, a counted-work "
        "ratio (work.client.syscalls_per_mb, ...: run --count-work), or a kind (throughput, cpu, latency, work); "
        "repeat for more. Default: throughput and CPU per bit of client and server.",
    ),
]
SinceOpt = Annotated[
    str | None,
    typer.Option("--since", help="Only runs from this run (id, uid or name), commit or ISO date (YYYY-MM-DD) on."),
]
# the defaults are stats/changepoints.py's (not imported here: `tunbench --help` stays free of numpy and scipy)
SpanOpt = Annotated[
    int | None,
    typer.Option(
        "--span",
        "--window",
        min=6,
        help="Points per sliding span of the change-point detection (default 50). --window is its old name.",
    ),
]
PvalueOpt = Annotated[
    float | None,
    typer.Option(
        "--max-pvalue",
        min=0.0,
        max=1.0,
        help="Largest t-test p-value for a change point to be kept (default 0.001).",
    ),
]
PerRunOpt = Annotated[
    bool,
    typer.Option(
        "--per-run", help="One point per run even when runs name commits (default: the runs of one commit pooled)."
    ),
]


def history(
    machine: MachineOpt = None,
    tunnel: TunnelOpt = None,
    metric: MetricOpt = None,
    since: SinceOpt = None,
    span: SpanOpt = None,
    max_pvalue: PvalueOpt = None,
    per_run: PerRunOpt = False,
    changes_only: Annotated[
        bool, typer.Option("--changes-only", help="Print the change points only, not every point.")
    ] = False,
    fail_on_regression_since: Annotated[
        str | None,
        typer.Option(
            "--fail-on-regression-since",
            metavar="REF",
            help="Exit 1 if a regression change point lies after REF (a run id, uid or name, a commit or an ISO "
            "date) and its series' shift after REF is significant over every series checked: a permutation test "
            "(Pettitt's rank statistic over the splits after REF), Holm-adjusted over the series at "
            "--gate-alpha, so series that did not change fail the gate together at most that often.",
        ),
    ] = None,
    gate_alpha: Annotated[
        float,
        typer.Option(
            "--gate-alpha",
            min=0.0,
            max=1.0,
            help="Family-wise rate of false regressions the gate allows over all the series it checks (default 0.05).",
        ),
    ] = 0.05,
    include_interfered: Annotated[
        bool,
        typer.Option(
            "--include-interfered",
            help="Keep trials whose window was interfered with (another tunbench run, foreign CPU, steal); by "
            "default they are left out, the header counts them and their points are marked.",
        ),
    ] = False,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Each case's throughput and CPU per bit over the runs of one machine, in time order (or commit order, when
    runs name their commits), with the median and CI per point and the change points (Hunter's split over sliding
    spans and t-test merge, robust to one disturbed point per segment, docs/history.md).

    Only runs with status done count; the others are left out and counted. Each change point says when it
    happened (run, time), between which commits, its size with a CI (simultaneous over the splits the search
    could have chosen), and whether it is a regression (its CI on the side of lower throughput, higher CPU per
    bit). Interfered trials are left out and their points marked (--include-interfered keeps them).

    The gate (--fail-on-regression-since) corrects for the many series it checks: a change point's t-test
    p-value was chosen by the search (on flat series, regressions are found about 1% of the time at
    --max-pvalue 0.001, and a third of 48-series gates failed), so each series with a regression after REF
    is tested again with a permutation test of its shift after REF, and the p-values are Holm-adjusted over
    every series checked (--gate-alpha, default 0.05: the family-wise false rate, docs/history.md).

    Exit status: 0 = no regression change point after --fail-on-regression-since's REF that passes the
    family-wise test (or no REF given); 1 = at least one; 2 = no store, an unknown REF or machine, or a bad
    option.
    """
    from tunbench.report import history as hist

    runs = hist.load(db, machine)
    h = hist.build(
        runs,
        machine=machine,
        tunnels=tunnel,
        metrics=metric,
        since=since,
        per_run=per_run,
        span=span,
        max_pvalue=max_pvalue,
        include_interfered=include_interfered,
    )
    print_history(h, changes_only=changes_only)
    if fail_on_regression_since is None:
        return
    g = hist.gate(h, fail_on_regression_since, runs, alpha=gate_alpha)
    family = f"Holm over {g.tested} series at {g.alpha:g}"
    for e in g.passed:
        console.print(f"[yellow]not counted ({family}): {escape(e.text(g.alpha))}[/]", highlight=False, soft_wrap=True)
    if failed := g.failed:
        for e in failed:
            err_console.print(f"[red]{escape(e.text(g.alpha))}[/]", highlight=False, soft_wrap=True)
        n = sum(len(e.changes) for e in failed)
        err_console.print(
            f"[red]{n} regression change point(s) after {escape(g.what)} in {len(failed)} series, significant "
            f"family-wise ({family})[/]",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(hist.EXIT_REGRESSED)
    console.print(
        f"no regression change point after {escape(g.what)} that is significant family-wise ({family})",
        highlight=False,
        soft_wrap=True,
    )


def print_history(h: History, *, changes_only: bool = False) -> None:
    console.print(h.header(), markup=False, highlight=False, soft_wrap=True)
    if not h.series:
        console.print("no series: no finished run measured these cases and metrics", highlight=False)
        return
    quiet = 0
    for s in h.series:
        if changes_only and not s.changes:
            quiet += 1
            continue
        order = "commit" if s.by_commit else "run"
        head = f"{s.title}: {len(s.points)} point(s) by {order}, {len(s.changes)} change point(s)"
        console.print(f"\n[bold]{escape(head)}[/]", highlight=False, soft_wrap=True)
        if not changes_only:
            console.print(_points_table(s))
        for c in s.changes:
            style = "red" if c.regression else "green" if c.improvement else "yellow"
            console.print(f"  [{style}]{escape(s.change_text(c))}[/]", highlight=False, soft_wrap=True)
        for p in s.points:
            if p.mark:
                console.print(f"  [yellow]{escape(p.key[:12])}: {escape(p.mark)}[/]", highlight=False, soft_wrap=True)
        for text in s.dropped:
            console.print(f"  [yellow]left out whole: {escape(text)}[/]", highlight=False, soft_wrap=True)
    if quiet:
        console.print(f"\nno change point in {quiet} other series", highlight=False)


def _points_table(s: Series) -> Table:
    starts = {c.point.index for c in s.changes}
    t = Table(box=None, pad_edge=False, show_edge=False)
    for col in ("#", "run(s)", "started", "commit", "median", "CI of the median", "n", ""):
        t.add_column(col, justify="right" if col in ("#", "n") else "left")
    fmt = s.metric.fmt
    for i, p in enumerate(s.points):
        sm = p.summary
        ci = f"[{fmt(sm.ci_low)}, {fmt(sm.ci_high)}]" if math.isfinite(sm.ci_low) else "–"
        if math.isfinite(sm.ci_coverage):
            ci += f" {sm.ci_coverage:.0%}"
        mark = "▶" if i in starts else ""
        t.add_row(
            f"{mark}{i + 1}",
            ", ".join(r.text for r in p.runs),
            p.time,
            p.commit[:12] or "–",
            fmt(sm.median),
            ci,
            str(sm.n),
            "interfered" if p.mark else "",
        )
    return t


def history_report(
    output: Path | None,
    machine: str | None,
    db: str,
) -> None:
    """`tunbench report --history`: the HTML page of the history (report/html/history.py)."""
    from tunbench.cli.checks import check_output_path, write_output
    from tunbench.report import history as hist
    from tunbench.report.html.history import render

    if output is not None:
        check_output_path(output, "-o")
    h = hist.build(hist.load(db, machine), machine=machine)
    page = render(h)
    if output is None:
        import sys

        sys.stdout.write(page)
        return
    write_output(output, page, "-o")
    err_console.print(f"history report written to {output.resolve()}", highlight=False)
