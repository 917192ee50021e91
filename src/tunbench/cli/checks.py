"""Checks the commands make before they start work, so a bad path or a missing privilege is one clear
`Error: ...` line up front instead of a traceback after a run (pure: they create nothing)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from tunbench.errors import TunbenchError


def _creatable_dir(directory: Path, what: str) -> None:
    """`directory` exists and is writable, or `mkdir -p` could make it: its nearest existing ancestor is a
    writable directory (and no component on the way is a regular file)."""
    d = directory
    while not d.exists():
        if d.is_symlink():
            raise TunbenchError(f"{what}: {d} is a dangling symbolic link")
        parent = d.parent
        if parent == d:
            break
        d = parent
    if not d.is_dir():
        raise TunbenchError(f"{what}: {d} is not a directory, so {directory} cannot be created")
    if not os.access(d, os.W_OK | os.X_OK):
        raise TunbenchError(f"{what}: directory {d} is not writable")


def check_output_path(path: Path, what: str) -> None:
    """A file tunbench will write (`--json`, `report -o`, `export -o`): not a directory, and its directory
    exists and is writable or can be created (it is created when the file is written, like --db's)."""
    if path.is_dir():
        raise TunbenchError(f"{what}: {path} is a directory (give a file name)")
    if path.exists() and not os.access(path, os.W_OK):
        raise TunbenchError(f"{what}: {path} is not writable")
    _creatable_dir(path.parent, what)


def check_output_dir(path: Path, what: str) -> None:
    """A directory tunbench will write into (`--flamegraph-dir`), created if missing."""
    if path.exists() and not path.is_dir():
        raise TunbenchError(f"{what}: {path} exists and is not a directory")
    _creatable_dir(path, what)


def write_output(path: Path, data: str | bytes, what: str) -> None:
    """Write a result file (text as UTF-8), creating its directory; an OS error becomes one clear line."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
    except OSError as e:
        raise TunbenchError(f"{what}: cannot write {path}: {e.strerror or e}") from e


def check_store_path(db: str | Path, *, connect: bool = True) -> None:
    """`--db` for a command that will create or extend the store: an existing file must be an SQLite
    database (opened read-only, nothing written); a new one must be creatable. A PostgreSQL URL is opened
    (and its store created or migrated), so a wrong URL or a server that is down fails before the run;
    `connect=False` (a dry run, which creates nothing) leaves it alone."""
    from tunbench.store.backend import BackendError, is_url, refuse_url_like

    try:  # a URL-shaped value that is no PostgreSQL URL (`postgresql:/db`): never a file
        refuse_url_like(db)
    except BackendError as e:
        raise TunbenchError(f"--db: {e}") from e
    if is_url(db):
        if not connect:
            return
        from tunbench.store.db import Store

        Store(db).close()
        return
    path = Path(db)
    if path.is_dir():
        raise TunbenchError(f"--db: {path} is a directory, not a result store (give a file name)")
    if not path.exists():
        _creatable_dir(path.parent, "--db")
        return
    if not os.access(path, os.R_OK | os.W_OK):
        raise TunbenchError(f"--db: {path} is not readable and writable")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        raise TunbenchError(f"--db: {path} is not a tunbench result store (not an SQLite database: {e})") from e
