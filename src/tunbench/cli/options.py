"""Options and guards several commands share."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tunbench.errors import TunbenchError

DbOpt = Annotated[
    str,
    typer.Option(
        "--db",
        help="Result store: an SQLite file, or a PostgreSQL URL (postgresql://user@host/dbname).",
        envvar="TUNBENCH_DB",
    ),
]
DEFAULT_DB = "tunbench.db"

RunArg = Annotated[str | None, typer.Argument(metavar="[RUN]", help="Run id, uid or name (default: latest).")]


def need_db(db: str | Path) -> None:
    from tunbench.store.db import store_exists

    if not store_exists(db):
        raise TunbenchError(f"no result store at {db} (run `tunbench run` first, or pass --db PATH or URL)")
