"""`tunbench db migrate | import | export`: the result store itself (store/db.py does the work).

import and export copy whole runs (trials, metrics, series, streams, artifacts), keeping their uids; a
run that is already in the target gets only the trials it lacks, so copying twice duplicates nothing, and
another run under the same uid (another start, scenario or trials) is refused (Store.import_run). Import
only reads its sources.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tunbench.cli.console import console
from tunbench.cli.options import DEFAULT_DB, DbOpt
from tunbench.errors import TunbenchError

db_app = typer.Typer(
    help="The result store: bring it to the current schema, import runs into it, export runs from it.",
    no_args_is_help=True,
)


def _copied(uid: str, rid: int, added: int, new: bool, where: str) -> str:
    if new:
        return f"run {uid}: copied to {where} as #{rid} ({added} trial(s))"
    if added:
        return f"run {uid}: already in {where} as #{rid}; added the {added} trial(s) it lacked"
    return f"run {uid}: already in {where} as #{rid}, nothing to add"


@db_app.command("migrate")
def migrate(db: DbOpt = DEFAULT_DB) -> None:
    """Bring the store to the current schema (create it if it is empty).

    Every command that opens a store does this too; `db migrate` does it on purpose, e.g. once for a
    shared PostgreSQL database."""
    from tunbench.store.db import Store

    with Store(db) as store:
        before, now = store.opened_at_version, store.schema_version()
        if before is None:
            console.print(f"created a tunbench store (schema {now}) in {store.where}", highlight=False, soft_wrap=True)
        elif before == now:
            console.print(f"{store.where} is at schema {now} already", highlight=False, soft_wrap=True)
        else:
            console.print(f"migrated {store.where} from schema {before} to {now}", highlight=False, soft_wrap=True)


@db_app.command("import")
def import_(
    sources: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE", help="SQLite result stores (e.g. a spool file) or JSON exports (tunbench export)."
        ),
    ],
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Copy runs from SQLite stores or JSON exports into the --db store, keeping their uids.

    Every run of an SQLite store (a spool file, another machine's store), or the run of a JSON export
    (which carries no artifacts). A run already there gets only the trials it lacks (by seq), so importing
    twice adds nothing; a different run under the same uid is refused. Sources are opened read-only."""
    from tunbench.report.exporters.json import run_from_export
    from tunbench.results import RunRecord
    from tunbench.store.db import Store

    for src in sources:
        if not src.is_file():
            raise TunbenchError(f"db import: {src} is not a file")
    with Store(db) as store:
        for src in sources:
            runs: list[RunRecord]
            if src.suffix == ".json":
                try:
                    doc = json.loads(src.read_text())
                except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
                    raise TunbenchError(f"db import: cannot read {src} as a tunbench JSON export: {e}") from e
                runs = [run_from_export(doc, source=str(src))]
            else:
                if Path(src).resolve() == Path(str(db)).resolve():
                    raise TunbenchError(f"db import: {src} is the --db store itself")
                with Store(src, read_only=True) as other:
                    runs = [other.full_run(r.id) for r in other.runs()]
            for run in runs:
                rid, added, new = store.import_run(run)
                console.print(_copied(run.uid, rid, added, new, store.where), highlight=False, soft_wrap=True)


@db_app.command("export")
def export(
    output: Annotated[Path, typer.Argument(metavar="OUTPUT.db", help="SQLite file to write (created or extended).")],
    runs: Annotated[
        list[str] | None,
        typer.Argument(metavar="RUN", help="Runs (id, uid or name); default: every run in the store."),
    ] = None,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Copy runs of the --db store into an SQLite file, everything stored for them included.

    The file is a store of its own (`tunbench show --db OUTPUT.db`) that `tunbench db import` reads back
    anywhere; runs already in it get only the trials they lack. (One run as JSON: `tunbench export`.)"""
    from tunbench.cli.checks import check_store_path
    from tunbench.store.db import Store, require_store

    require_store(db)  # a missing store is a bad argument (exit 2), as for show and history
    if Path(str(db)).resolve() == output.resolve():
        raise TunbenchError(f"db export: {output} is the --db store itself")
    check_store_path(output)
    with Store(db) as store:
        refs = [store.find_run(r).id for r in runs] if runs else [r.id for r in store.runs()]
        with Store(output) as out:
            for rid in refs:
                run = store.full_run(rid)
                new_id, added, new = out.import_run(run)
                console.print(_copied(run.uid, new_id, added, new, str(output)), highlight=False, soft_wrap=True)
