"""`tunbench show`: a stored run's tables again, or the list of runs. `print_run` is also what
`tunbench run` prints at the end, so the two always show the same tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from tunbench.cli.console import console
from tunbench.cli.options import DEFAULT_DB, DbOpt, RunArg

if TYPE_CHECKING:
    from tunbench.results import RunRecord
    from tunbench.store.db import Store


def print_run(run: RunRecord, title: str) -> None:
    """The run's summary table (when it has throughput cases), each workload's own table, and the warnings;
    a run that ended before its first trial finished says so."""
    from tunbench.report.common import baseline_line, host_lines, placement_line
    from tunbench.report.faults import fault_lines
    from tunbench.report.interference_line import line as interference_line
    from tunbench.report.scaling_table import scaling_tables
    from tunbench.report.summary import summarize_trials
    from tunbench.report.terminal import has_throughput_cases, summary_table, warning_lines, workload_tables
    from tunbench.report.work_table import instruction_lines

    summaries = summarize_trials(run.trials)
    for line in host_lines(run.provenance):
        console.print(line, markup=False, highlight=False)
    if not run.trials:
        console.print(f"{title}: no trial finished", markup=False, highlight=False)
        return
    placed = placement_line(run.trials)
    if placed:
        console.print(placed, markup=False, highlight=False)
    if has_throughput_cases(summaries):
        console.print(summary_table(summaries, title=title))
    for table in workload_tables(run.trials):
        console.print(table)
    for table in scaling_tables(run.trials):
        console.print(table)
    if host := interference_line(run.trials):
        console.print(host, markup=False, highlight=False)
    if baseline := baseline_line(run.trials):
        console.print(baseline, markup=False, highlight=False)
    for line in instruction_lines(run.trials):
        console.print(line, markup=False, highlight=False)
    for line in fault_lines(run.trials):
        console.print(line, markup=False, highlight=False)
    for line in warning_lines(summaries):
        console.print(line)


def print_logs(store: Store, run: RunRecord, seq: int) -> None:
    from tunbench.runner import LOG_TAIL_BYTES

    trial = next((t for t in run.trials if t.seq == seq), None)
    if trial is None or trial.id is None:
        seqs = ", ".join(str(t.seq) for t in run.trials)
        raise typer.BadParameter(f"run #{run.id} has no trial {seq} (its trials: {seqs})", param_hint="--logs")
    found = {n: d for n, d in store.artifacts(trial.id).items() if n.startswith("log/")}
    if not found:
        console.print(
            f"trial {seq} ({trial.label} · {trial.profile} · {trial.workload}) has no stored logs: they are kept "
            "for failed trials and for every recovery trial",
            markup=False,
        )
        return
    for name, data in found.items():
        console.rule(f"trial {seq} · {trial.label} · {name} (its last {LOG_TAIL_BYTES // 1024} KiB)")
        console.print(data.decode(errors="replace"), markup=False, highlight=False, end="", soft_wrap=True)


def show(
    run_ref: RunArg = None,
    list_runs: Annotated[bool, typer.Option("--list", "-l", help="List the runs in the store.")] = False,
    logs: Annotated[
        int | None,
        typer.Option(
            "--logs",
            metavar="SEQ",
            help="Print the logs stored with the run's trial SEQ (the first column of its progress lines' order: "
            "1, 2, ...). Logs are kept for failed trials and for every recovery trial.",
        ),
    ] = None,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Print a stored run's table again (or list the runs, or one trial's logs). Exit status 2 when --db names
    no store (as `tunbench history`)."""
    from rich.table import Table

    from tunbench.store.db import Store, require_store

    require_store(db)
    with Store(db) as store:
        if list_runs:
            table = Table("id", "uid", "name", "started", "status", "trials", header_style="bold")
            for r in store.runs():
                table.add_row(
                    str(r.id), r.uid, r.name, r.started_at, r.status, str(len(store.trials(r.id, with_series=False)))
                )
            console.print(table)
            return
        run = store.find_run(run_ref)
        if logs is not None:
            print_logs(store, run, logs)
            return
    print_run(run, title=f"tunbench run {run.uid} (#{run.id}, {run.status}, {run.started_at})")
