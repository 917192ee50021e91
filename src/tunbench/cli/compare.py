"""`tunbench compare`: its flags parsed (a bad value is a CompareError, exit 2, naming the flag), then
report/compare/ compares, report/precision.py says what a --target needs, report/flamediff.py draws the
differential flamegraphs and report/html/compare.py the page; this prints the table and the lines."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from tunbench.cli.console import console
from tunbench.cli.options import DEFAULT_DB, DbOpt, GateOpt

if TYPE_CHECKING:
    from tunbench.report.compare import Gate


def compare(
    a: Annotated[str, typer.Argument(metavar="A", help="Baseline: run id, uid or name, or a JSON export file.")],
    b: Annotated[
        str | None,
        typer.Argument(
            metavar="B",
            help="Candidate: run or JSON file (default: A itself, with --label-a/-b: paired by repetition).",
        ),
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
        str,
        typer.Option(
            "--metrics",
            help="Metric kinds to compare: throughput,cpu,latency gate; work (counted work, run --count-work) "
            "is shown and never gates.",
        ),
    ] = "throughput,cpu,latency,work",
    unpaired: Annotated[
        bool,
        typer.Option(
            "--unpaired", help="Compare two labels of one run as independent samples too (to see what pairing gains)."
        ),
    ] = False,
    include_interfered: Annotated[
        bool,
        typer.Option(
            "--include-interfered",
            help="Keep trials whose window was interfered with (another tunbench run, foreign CPU, steal); by "
            "default they are left out, with their pairs' partners, and a note says how many and why.",
        ),
    ] = False,
    flamegraph_diff: Annotated[
        Path | None,
        typer.Option(
            "--flamegraph-diff",
            help="Write a differential flamegraph (SVG) per matched case and side into this directory, from the "
            "stacks `run --flamegraph` stored with A's and B's trials (inferno-diff-folded; needs the store).",
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            help="Also write the comparison as one self-contained HTML page: per case, its verdicts, its counted-work "
            "changes with their CIs (run --count-work) and, beside them, the differential flamegraph of each side "
            "(when A and B were recorded with --flamegraph at one sampling rate; needs the store and inferno).",
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            help="The smallest change you need to detect, e.g. 3%: a line says the MDE reached and, when it is "
            "above, about how many more pairs and how much time (at the run's pace) would reach it.",
        ),
    ] = None,
    gate: GateOpt = "cost",
    wide: Annotated[
        float,
        typer.Option(
            "--wide",
            help="The gate's wide tier (throughput and each side's CPU per bit under --gate cost) is judged at "
            "this multiple of --threshold "
            "(and of --target).",
        ),
    ] = 2.0,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Compare B to A per matching case: change of the median with a distribution-free CI and its real
    coverage, rank-test p-value (raw and Holm-adjusted), verdict, MDE.

    Changes are relative (median(B) / median(A) - 1), except for signed metrics (latency increase under
    load) and data with a value <= 0: those are absolute, median(B) - median(A) in the metric's unit, and
    take --threshold-ms instead of the relative --threshold. What gates (--gate cost, the default): the
    tunnel's own instructions per byte (outside Go's runtime, each side's added), where A and B counted them
    (run --count-instructions: a count the box's noise does not reach; the CPU time then goes to the wide tier),
    else its CPU per bit of payload delivered, client and server together, over whole trials (CPU per bit
    of goodput where a trial did not count its payload; and latency), at the threshold, the quietest figure
    of its speed on a shared host, and throughput, the wire overhead (bytes on the wire per byte delivered:
    padding shows there, never as a cheaper CPU figure) and each side's CPU per bit at --wide (2) times the
    threshold in a family of their own; --gate all: every metric at the threshold. A line above the
    verdict says which. Verdicts use p-values Holm-adjusted within each family, so that by the test a false
    verdict in a family has at most alpha's chance (0.05) when trials are independent. Measured on this
    project's 2-core VM with this gate's predecessor, which held the CPU per bit carried in the main tier (104
    A/A runs of the README's A/B line, up to 2 minutes each, scripts/gate_error_rates.py,
    docs/notes/precision-research.md): false verdicts in 0 of 104 (95% CI 0-3.5%).
    A significant change smaller than its threshold is named in the table ("costlier, within 6.0%") and
    does not gate.

    Analysis: two runs are compared unpaired (Mann-Whitney U, Hodges-Lehmann shift CI). Two labels of ONE
    run (A alone, or A = B, with --label-a/--label-b) are compared paired: trials of the same case and
    repetition are pairs (a pair whose partner failed is dropped and counted); paired t-test on the
    within-pair log ratios (differences for signed metrics), its mean and t interval, MDE from its spread. A
    case with fewer than 3 pairs falls back to unpaired. The caption says which. Fewest repetitions for any
    verdict: 3 pairs (paired); unpaired, 4 per side for 1 gated comparison, 5 for 2-6, 6 for 7-23, 7 for
    24-85, 8 for 86-321, 9 or more above 321 (Holm's first level must be reachable by the rank test). `run
    --dry-run` says it for a planned run.

    Warnings come grouped, one line per cause with a count. The last line is the verdict: how many gated
    comparisons regressed, improved, are unchanged (no significant change, and the MDE is finite and at
    most the threshold) or undecided (a change of the threshold's size could have gone unseen), the
    analysis, and the smallest detectable change.

    Exit status: 0 = no regression (some comparisons may be undecided: the verdict line says how many),
    1 = some case regressed beyond the threshold (significantly worse), 2 = A or B could not be loaded or
    matched. Cases of the direct baseline are shown but do not gate.
    """
    from tunbench.report.compare import compare_lines, compare_runs, compare_table, load_run
    from tunbench.report.flamediff import asked_diffs, write_diffs

    if html is not None:
        from tunbench.cli.checks import check_output_path

        check_output_path(html, "--html")  # before loading and comparing, not after
    kinds = _kinds(metrics)
    limit = _fraction(threshold, "--threshold")
    goal = _target(target)
    tiers = _gate(gate, wide)
    run_a = load_run(a, db)
    run_b = load_run(b, db) if b is not None else run_a
    result = compare_runs(
        run_a, run_b, label_a=label_a, label_b=label_b, threshold=limit, threshold_abs={"ms": threshold_ms},
        kinds=kinds, use_pairs=not unpaired, include_interfered=include_interfered, gate=tiers,
    )  # fmt: skip
    table = compare_table(result)
    lines: list[str] = compare_lines(result)
    goal_lines: list[str] = []
    if goal is not None:
        from tunbench.report.precision import target_lines

        goal_lines = target_lines(result, [run_a, run_b], goal)
        lines += [escape(line) for line in goal_lines]
    found = asked_diffs(
        ((r.case_a, r.case_b) for r in result.rows), run_a.trials, run_b.trials, db,
        files=flamegraph_diff is not None, page=html is not None,
    )  # fmt: skip
    if flamegraph_diff is not None:
        lines += [escape(f"flamegraph diff: {line}") for line in write_diffs(found or [], flamegraph_diff)]
    if html is not None:
        from tunbench.cli.checks import write_output
        from tunbench.report.html.compare import render_comparison

        write_output(html, render_comparison(result, found, goal_lines), "--html")
        lines.append(escape(f"comparison page written to {html.resolve()}"))
    if console.is_terminal:
        console.print(table)
        for line in lines:
            console.print(line)
    else:
        # Piped (CI logs, | tee): no terminal width to respect, and a table squeezed to 80 columns loses its
        # last columns (verdict, MDE). Print it at its natural width, and the lines unwrapped.
        # (Console.print(width=) can only narrow, so a console of that width does the printing.)
        natural = console.measure(table, options=console.options.update(width=10_000)).maximum
        broad = Console(width=max(console.width, natural))
        broad.print(table)
        for line in lines:
            broad.print(line, soft_wrap=True)
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def _fraction(text: str, flag: str) -> float:
    """A share flag's value (units.parse_fraction); a bad one is a CompareError (exit 2) naming the flag."""
    from tunbench.report.compare import CompareError
    from tunbench.units import parse_fraction

    try:
        return parse_fraction(text, flag)
    except ValueError as e:
        raise CompareError(str(e)) from None


def _target(text: str | None) -> float | None:
    from tunbench.report.compare import CompareError

    if text is None:
        return None
    goal = _fraction(text, "--target")
    if goal <= 0.0:
        raise CompareError(f"--target {text!r}: must be above 0%, e.g. 3%")
    return goal


def _gate(name: str, wide: float) -> Gate:
    """The --gate and --wide flags as a Gate; a bad one is a CompareError (exit 2) naming the flag."""
    from tunbench.report.compare import CompareError, parse_gate

    try:
        return parse_gate(name, wide)
    except ValueError as e:
        flag = "--wide" if "wide" in str(e) else "--gate"
        raise CompareError(f"{flag}: {e}") from None


def _kinds(text: str) -> tuple[str, ...]:
    from tunbench.report.compare import METRIC_KINDS, CompareError

    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    bad = [k for k in kinds if k not in METRIC_KINDS]
    if bad or not kinds:
        raise CompareError(f"--metrics {text!r}: choose from {', '.join(METRIC_KINDS)}")
    return kinds
