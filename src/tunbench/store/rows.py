"""How a record is stored: one mapping per record type, the only place a field meets its column.

A run (`RunRecord`) is a row of `runs`, a trial (`TrialRecord`) a row of `trials`; each field of the
dataclass is a column of the same name unless the mapping renames it, and a field stored as JSON text says
so. A field kept elsewhere is named as such: a run's trials are rows of their own, and a trial's metrics,
series, streams and artifacts are rows of their parts' tables (``PARTS``), each part with its own
rows-and-back. The columns a table has besides (who owns a run, its trials' run id) are the store's own and
never a record's. db.py builds every query that writes or reads a record from these; the SQL is the same
on SQLite and PostgreSQL (backend.py holds what differs).

``unmapped`` names a record field that no column or part holds: tests/unit/test_store_rows.py checks there
is none, and that the mapped columns are the tables' own.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from tunbench.results import RunRecord, TrialRecord

log = logging.getLogger(__name__)

R = TypeVar("R")


def _same(value: Any) -> Any:
    return value


@dataclasses.dataclass(frozen=True)
class Column:
    """A record field as a column: its name there, and how a value goes in and comes back."""

    field: str
    name: str
    to_db: Callable[[Any], Any] = _same
    from_db: Callable[[Any], Any] = _same


@dataclasses.dataclass(frozen=True)
class Rows(Generic[R]):
    """A record type as rows of one table. ``columns``: every field that is a column, `id` first (the key the
    database gives); ``elsewhere``: the fields other tables hold; ``own``: the table's columns that are no
    field's (written by the store alone)."""

    table: str
    record: type[R]
    columns: tuple[Column, ...]
    elsewhere: frozenset[str]
    own: tuple[str, ...]

    @classmethod
    def of(
        cls,
        table: str,
        record: type[R],
        *,
        renamed: Mapping[str, str] | None = None,
        json_fields: frozenset[str] = frozenset(),
        elsewhere: frozenset[str] = frozenset(),
        own: tuple[str, ...] = (),
    ) -> Rows[R]:
        """The mapping read from the dataclass's fields: a column per field not held `elsewhere`, named as
        the field unless `renamed`, JSON text for `json_fields`."""
        names = [f.name for f in dataclasses.fields(record) if f.name not in elsewhere]  # type: ignore[arg-type]
        names.sort(key=lambda n: n != "id")
        columns = tuple(
            Column(n, (renamed or {}).get(n, n), *((json.dumps, json.loads) if n in json_fields else ())) for n in names
        )
        return cls(table, record, columns, elsewhere, own)

    def unmapped(self) -> set[str]:
        """The record's fields that neither a column nor another table holds (none, when the mapping is whole)."""
        fields = {f.name for f in dataclasses.fields(self.record)}  # type: ignore[arg-type]
        return fields - {c.field for c in self.columns} - self.elsewhere

    def column(self, field: str) -> Column:
        """The column that holds `field`."""
        return next(c for c in self.columns if c.field == field)

    def select(self) -> str:
        """`SELECT <every mapped column> FROM <table>`, for a WHERE to follow."""
        return f"SELECT {', '.join(c.name for c in self.columns)} FROM {self.table}"

    def insert(self) -> str:
        """The INSERT of a record (every column but `id`, which the database gives) and then the table's
        ``own`` columns, values in that order (``values``, then the store's own); it returns the new id."""
        names = [c.name for c in self.columns if c.field != "id"] + list(self.own)
        marks = ", ".join("?" for _ in names)
        return f"INSERT INTO {self.table} ({', '.join(names)}) VALUES ({marks}) RETURNING id"

    def values(self, rec: R) -> tuple[Any, ...]:
        """A record's values for ``insert``, before the own columns' values."""
        return tuple(c.to_db(getattr(rec, c.field)) for c in self.columns if c.field != "id")

    def record_of(self, row: Sequence[Any]) -> R:
        """A row of ``select`` as its record (the fields held elsewhere at their defaults)."""
        return self.record(**{c.field: c.from_db(v) for c, v in zip(self.columns, row, strict=True)})


RUNS: Rows[RunRecord] = Rows.of(
    "runs",
    RunRecord,
    renamed={"scenario": "scenario_json"},
    json_fields=frozenset({"provenance", "scenario"}),
    elsewhere=frozenset({"trials"}),
    own=("owner_host", "owner_pid", "owner_started", "prefix"),
)


@dataclasses.dataclass(frozen=True)
class Part:
    """A field of a trial that is rows of a table of its own (keyed by the trial's id, `trial_id`): the
    columns after the key, the rows a trial's value makes, and the value its rows read back as. ``order``:
    what the rows are read back in (empty: as the database gives them; ``INSERTION``: the order they were
    written in, which each backend spells its own way)."""

    field: str
    table: str
    columns: tuple[str, ...]
    rows: Callable[[int, TrialRecord], list[tuple[Any, ...]]]
    value: Callable[[list[Any]], Any]
    order: str = ""

    def insert(self) -> str:
        marks = ", ".join("?" for _ in range(len(self.columns) + 1))
        return f"INSERT INTO {self.table} (trial_id, {', '.join(self.columns)}) VALUES ({marks})"

    def select(self, insertion_order: str) -> str:
        """The rows of one trial (`?`: its id), in ``order``; `insertion_order`: the backend's spelling of
        ``INSERTION``."""
        order = insertion_order if self.order == INSERTION else self.order
        where = f"SELECT {', '.join(self.columns)} FROM {self.table} WHERE trial_id = ?"
        return f"{where} ORDER BY {order}" if order else where


INSERTION = "insertion"


def series_rows(trial_id: int, t: TrialRecord) -> list[tuple[int, str, float, float | None]]:
    """The series rows of a trial: every finite value as it is, a NaN or infinite one as NULL (a gap in its
    place; it reads back as NaN, which the readers of series skip). A point without a finite time cannot be
    placed and is left out (logged). Until issue 43 item 8 a NaN failed the NOT NULL constraint the column
    had, and the trial's whole write with it."""
    rows: list[tuple[int, str, float, float | None]] = []
    unplaced: dict[str, int] = {}
    for name, pts in t.series.items():
        for ts, val in pts:
            if ts is None or not math.isfinite(ts):
                unplaced[name] = unplaced.get(name, 0) + 1
                continue
            rows.append((trial_id, name, float(ts), float(val) if val is not None and math.isfinite(val) else None))
    for name, n in unplaced.items():
        log.warning("trial %s: %d point(s) of series %s have no finite time and are not stored", t.seq, n, name)
    return rows


def _series(rows: list[Any]) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for name, ts, val in rows:
        out.setdefault(name, []).append((ts, math.nan if val is None else val))  # NULL: a gap
    return out


METRICS = Part(
    "metrics", "metrics", ("name", "value"), lambda tid, t: [(tid, k, v) for k, v in t.metrics.items()], dict
)
SERIES = Part("series", "series", ("name", "t_s", "value"), series_rows, _series, order=INSERTION)


def stream_rows(trial_id: int, t: TrialRecord) -> list[tuple[int, int, str, float | None, int | None]]:
    """The streams rows of a trial: a rate that is NaN or infinite as NULL (SQLite binds NaN as NULL, which
    failed the column's NOT NULL until schema 7, and the trial's whole write with it); it reads back as NaN,
    as a series' gap does, which the readers of streams skip."""
    return [(trial_id, n, d, float(bps) if math.isfinite(bps) else None, retr) for n, d, bps, retr in t.streams]


STREAMS = Part(
    "streams",
    "streams",
    ("stream", "direction", "received_bps", "retransmits"),
    stream_rows,
    lambda rows: [(int(s[0]), str(s[1]), math.nan if s[2] is None else float(s[2]), s[3]) for s in rows],
)
ARTIFACTS = Part(
    "artifacts",
    "artifacts",
    ("name", "data"),
    lambda tid, t: [(tid, k, zlib.compress(v)) for k, v in t.artifacts.items()],
    lambda rows: {str(n): zlib.decompress(d) for n, d in rows},
    order="name",
)
PARTS = (METRICS, SERIES, STREAMS, ARTIFACTS)

TRIALS: Rows[TrialRecord] = Rows.of(
    "trials",
    TrialRecord,
    renamed={"window_s": "duration_s"},  # the measured window; the column keeps its first name (schema.sql)
    json_fields=frozenset({"params"}),
    elsewhere=frozenset(p.field for p in PARTS),
    own=("run_id",),
)
