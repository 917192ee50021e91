"""How a measuring command (`run`, `calibrate`) ends: its exit status from how the run ended and its
trials (0 every trial ok; 4 some failed; 5 none measured anything; 130 interrupted), said on stderr."""

from __future__ import annotations

from collections.abc import Sequence

import typer

from tunbench.cli.console import err_console
from tunbench.errors import EXIT_INTERRUPTED, EXIT_NOTHING_MEASURED, EXIT_TRIALS_FAILED
from tunbench.results import TrialRecord


def exit_for(status: str, trials: Sequence[TrialRecord], *, nothing: str = "", some: str = "") -> None:
    """Raise typer.Exit with the run's status unless every trial is ok; `nothing` and `some` end the
    message for no trial measured and for some failed."""
    if status == "interrupted":
        err_console.print("[yellow]interrupted: finished trials are kept in the store[/]")
        raise typer.Exit(EXIT_INTERRUPTED)
    failed = sum(1 for t in trials if t.status != "ok")
    if trials and failed == len(trials):
        err_console.print(f"[red]nothing measured: all {failed} trial(s) failed{nothing}[/]")
        raise typer.Exit(EXIT_NOTHING_MEASURED)
    if failed:
        err_console.print(f"[yellow]{failed} trial(s) failed (of {len(trials)}){some}[/]")
        raise typer.Exit(EXIT_TRIALS_FAILED)
