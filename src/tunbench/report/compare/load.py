"""A or B from the store or a JSON export file, and its name in the report. The only I/O of compare."""

from __future__ import annotations

import json
from pathlib import Path

from tunbench.errors import ExportError, TunbenchError
from tunbench.report.compare.result import CompareError
from tunbench.report.exporters.json import run_from_export
from tunbench.results import RunRecord


def load_run(ref: str, db: str | Path) -> RunRecord:
    """A run from a JSON export file (if ``ref`` is an existing file) or from the store at ``db``."""
    from tunbench.store.db import Store, store_exists

    path = Path(ref)
    if path.is_file():
        if _is_sqlite(path):
            raise CompareError(
                f"{path} is a result store, not a run: name the runs and give the store, "
                f"e.g. `tunbench compare RUN_A RUN_B --db {path}` (`tunbench show --list --db {path}` lists them)"
            )
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CompareError(f"cannot read {path} as a tunbench JSON export: {e}") from e
        try:
            return run_from_export(data, source=str(path))
        except ExportError as e:
            raise CompareError(str(e)) from None
    if not store_exists(db):
        raise CompareError(f"{ref!r} is not a file and there is no result store at {db} (pass --db PATH)")
    try:
        with Store(db) as store:
            return store.find_run(ref)
    except TunbenchError as e:
        raise CompareError(str(e)) from e


def _is_sqlite(path: Path) -> bool:
    """Whether the file starts with SQLite's header (a store given where a run or an export was expected)."""
    try:
        with path.open("rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def run_name(run: RunRecord) -> str:
    name = f" {run.name}" if run.name else ""
    return f"run #{run.id} ({run.uid}{name})"
