"""`tunbench link selftest`'s output: a line per verdict as it comes, the numbers as JSON, and the closing
count. The measurements are link/selftest.py's."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tunbench.cli.console import console
from tunbench.link.bench import Result


def show(r: Result) -> None:
    """One verdict as a line: PASS, FAIL or INFO (measured, no bound to pass), its name and what it says."""
    mark = {True: "[green]PASS[/]", False: "[red]FAIL[/]", None: "[blue]INFO[/]"}[r.passed]
    console.print(f"{mark} {r.name}: {r.detail}", highlight=False)


def write_json(results: list[Result], path: Path) -> None:
    path.write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=2) + "\n")


def summary(results: list[Result]) -> list[str]:
    """The names of the verdicts that missed their bounds, after a line that counts them."""
    failed = [r.name for r in results if r.passed is False]
    console.print(
        f"{len(results) - len(failed)}/{len(results)} within bounds"
        + (f"; missed: {', '.join(failed)}" if failed else "")
    )
    return failed
