"""Options and guards several commands share."""

from __future__ import annotations

import re
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


def parse_cpuset(value: str | None) -> str | dict[str, str] | None:
    """`--cpuset off|split|client=0,server=1,link=1` -> the scenario's [run] cpuset (None: not given)."""
    if value is None:
        return None
    text = value.strip()
    if "=" not in text:
        if text not in ("off", "split"):
            raise typer.BadParameter(
                f"{value!r}: expected off, split or client=0,server=1[,link=1]", param_hint="--cpuset"
            )
        return text
    out: dict[str, str] = {}
    for item in re.split(r",(?=\s*[a-z]+\s*=)", text):
        role, _, cpus = item.partition("=")
        if not role.strip() or not cpus.strip():
            raise typer.BadParameter(f"{value!r}: expected client=0,server=1[,link=1]", param_hint="--cpuset")
        out[role.strip()] = cpus.strip()
    return out


CpusetOpt = Annotated[
    str | None,
    typer.Option(
        "--cpuset",
        help="CPU placement of each side ([run] cpuset): off (default); split (client side: tunnel client + "
        "iperf3 client on one CPU, server side on another, the emulator on a third where there is one, else "
        "with the server); or client=0,server=1,link=1. Recorded with every trial.",
    ),
]


RunArg = Annotated[str | None, typer.Argument(metavar="RUN", help="Run id, uid or name (default: latest).")]


def need_db(db: str | Path) -> None:
    from tunbench.store.db import store_exists

    if not store_exists(db):
        raise TunbenchError(f"no result store at {db} (run `tunbench run` first, or pass --db PATH or URL)")
