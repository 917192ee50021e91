"""Options and guards several commands share."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tunbench.errors import TunbenchError

DbOpt = Annotated[Path, typer.Option("--db", help="Result store (SQLite).", envvar="TUNBENCH_DB")]
DEFAULT_DB = Path("tunbench.db")

RunArg = Annotated[str | None, typer.Argument(metavar="[RUN]", help="Run id, uid or name (default: latest).")]


def need_db(db: Path) -> None:
    if not db.exists():
        raise TunbenchError(f"no result store at {db} (run `tunbench run` first, or pass --db PATH)")
