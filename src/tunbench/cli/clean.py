"""`tunbench clean`: remove what crashed or killed runs left behind (host/clean.py does the work)."""

from __future__ import annotations

from typing import Annotated

import typer

from tunbench.cli.agent import HostsOpt, clean_hosts
from tunbench.cli.console import console, err_console
from tunbench.cli.options import DEFAULT_DB, DbOpt


def clean(
    force: Annotated[bool, typer.Option("--force", help="Also remove objects of runs that are still alive.")] = False,
    db: DbOpt = DEFAULT_DB,
    hosts: HostsOpt = None,
) -> None:
    """Remove namespaces, processes, links, cgroups and temp dirs left behind by crashed or killed runs, and mark
    the runs in the --db store whose process on this host is gone as `killed` (any command that opens the
    store does that too). With --hosts, every host of the inventory is cleaned too (over ssh)."""
    from tunbench.host.clean import clean as do_clean
    from tunbench.store.db import Store, StoreError, store_exists

    failed_hosts = clean_hosts(hosts) if hosts is not None else 0
    rep = do_clean(force=force)
    if rep.empty():
        console.print("nothing to clean")
    else:
        console.print(f"removed: {rep.summary()}")
    for uid in rep.skipped_live:
        console.print(f"[yellow]run {uid} is still running: left alone (use --force)[/]")
    if store_exists(db):
        try:
            with Store(db) as store:
                killed = store.killed_on_open
        except StoreError as e:
            err_console.print(f"[yellow]result store not checked: {e}[/]", highlight=False)
            return
        for uid in killed:
            console.print(f"run {uid}: its process is gone, marked killed in {store.where}", highlight=False)
    if failed_hosts:
        raise typer.Exit(1)
