"""`tunbench clean`: remove what crashed or killed runs left behind (host/clean.py does the work)."""

from __future__ import annotations

from typing import Annotated

import typer

from tunbench.cli.console import console


def clean(
    force: Annotated[bool, typer.Option("--force", help="Also remove objects of runs that are still alive.")] = False,
) -> None:
    """Remove namespaces, processes, cgroups and temp dirs left behind by crashed or killed runs."""
    from tunbench.host.clean import clean as do_clean

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
