"""SQLite store. Each trial is committed the moment it ends, so a killed run keeps what it measured."""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from tunbench.errors import TunbenchError
from tunbench.results import RunRecord, TrialRecord
from tunbench.store.migrations import MIGRATIONS, SCHEMA_VERSION


class StoreError(TunbenchError):
    pass


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Store:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(path, timeout=30)
        except (sqlite3.Error, OSError) as e:
            raise StoreError(f"cannot open result store {path}: {getattr(e, 'strerror', None) or e}") from e
        try:
            self.db.execute("PRAGMA foreign_keys = ON")
            self.db.execute("PRAGMA journal_mode = WAL")
        except sqlite3.DatabaseError as e:  # any file opens; the first statement finds out what it is
            self.db.close()
            raise StoreError(f"{path} is not a tunbench result store (not an SQLite database: {e})") from e
        self._init_schema()

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- schema ----------------------------------------------------------------------------------
    def schema_version(self) -> int | None:
        try:
            row = self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.OperationalError:
            return None
        return int(row[0]) if row else None

    def _init_schema(self) -> None:
        try:
            version = self.schema_version()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path} is not a tunbench result store: {e}") from e
        if version is None:
            tables = self.db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
            if tables:
                raise StoreError(f"{self.path} is an SQLite file but not a tunbench store (no schema_version)")
            sql = resources.files("tunbench.store").joinpath("schema.sql").read_text()
            with self.db:
                self.db.executescript(sql)
                self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            return
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {version}, newer than this tunbench understands "
                f"({SCHEMA_VERSION}); upgrade tunbench"
            )
        for v in range(version + 1, SCHEMA_VERSION + 1):
            if v not in MIGRATIONS:
                raise StoreError(f"no migration from schema {v - 1} to {v}")
            with self.db:
                self.db.executescript(MIGRATIONS[v])
                self.db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(v),))

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        try:
            with self.db:
                yield self.db
        except sqlite3.Error as e:
            raise StoreError(f"writing to {self.path} failed: {e}") from e

    # ---- writing ---------------------------------------------------------------------------------
    def create_run(
        self,
        *,
        uid: str,
        name: str,
        tunbench_version: str,
        provenance: dict[str, Any],
        scenario_text: str,
        scenario_hash: str,
        scenario: dict[str, Any],
    ) -> int:
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO runs (uid, name, started_at, status, tunbench_version, provenance, scenario_text,"
                " scenario_hash, scenario_json) VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?)",
                (
                    uid,
                    name,
                    now_iso(),
                    tunbench_version,
                    json.dumps(provenance),
                    scenario_text,
                    scenario_hash,
                    json.dumps(scenario),
                ),
            )
            return int(cur.lastrowid or 0)

    def update_provenance(self, run_id: int, provenance: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute("UPDATE runs SET provenance = ? WHERE id = ?", (json.dumps(provenance), run_id))

    def finish_run(self, run_id: int, status: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE runs SET status = ?, finished_at = ? WHERE id = ?", (status, now_iso(), run_id))

    def add_trial(self, run_id: int, t: TrialRecord) -> int:
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO trials (run_id, seq, tunnel, label, profile, workload, flows, direction, repetition,"
                " params, status, error, started_at, duration_s, clients, variant)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    t.seq,
                    t.tunnel,
                    t.label,
                    t.profile,
                    t.workload,
                    t.flows,
                    t.direction,
                    t.repetition,
                    json.dumps(t.params),
                    t.status,
                    t.error,
                    t.started_at,
                    t.duration_s,
                    t.clients,
                    t.variant,
                ),
            )
            tid = int(cur.lastrowid or 0)
            db.executemany("INSERT INTO metrics VALUES (?, ?, ?)", [(tid, k, v) for k, v in t.metrics.items()])
            db.executemany(
                "INSERT INTO series VALUES (?, ?, ?, ?)",
                [(tid, name, ts, val) for name, pts in t.series.items() for ts, val in pts],
            )
            db.executemany("INSERT INTO streams VALUES (?, ?, ?, ?, ?)", [(tid, *s) for s in t.streams])
            db.executemany(
                "INSERT INTO artifacts VALUES (?, ?, ?)", [(tid, k, zlib.compress(v)) for k, v in t.artifacts.items()]
            )
        t.id = tid
        return tid

    # ---- reading ---------------------------------------------------------------------------------
    def runs(self) -> list[RunRecord]:
        rows = self.db.execute("SELECT * FROM runs ORDER BY id").fetchall()
        return [self._run_from_row(r) for r in rows]

    def _run_from_row(self, r: tuple[Any, ...]) -> RunRecord:
        cols = [d[0] for d in self.db.execute("SELECT * FROM runs LIMIT 0").description]
        d = dict(zip(cols, r, strict=True))
        return RunRecord(
            id=d["id"],
            uid=d["uid"],
            name=d["name"],
            started_at=d["started_at"],
            finished_at=d["finished_at"],
            status=d["status"],
            tunbench_version=d["tunbench_version"],
            provenance=json.loads(d["provenance"]),
            scenario_text=d["scenario_text"],
            scenario_hash=d["scenario_hash"],
            scenario=json.loads(d["scenario_json"]),
        )

    def find_run(self, ref: str | None) -> RunRecord:
        """A run by id, uid or name; None means the latest."""
        if ref is None or ref == "latest":
            row = self.db.execute("SELECT * FROM runs ORDER BY id DESC LIMIT 1").fetchone()
            if row is None:
                raise StoreError(f"no runs in {self.path} yet: `tunbench run` first")
        else:
            row = None
            if ref.isdigit():
                row = self.db.execute("SELECT * FROM runs WHERE id = ?", (int(ref),)).fetchone()
            if row is None:
                row = self.db.execute(
                    "SELECT * FROM runs WHERE uid = ? OR name = ? ORDER BY id DESC LIMIT 1", (ref, ref)
                ).fetchone()
            if row is None:
                raise StoreError(f"no run {ref!r} in {self.path} (see `tunbench show --list`)")
        run = self._run_from_row(row)
        run.trials = self.trials(run.id)
        return run

    def trials(self, run_id: int, *, with_series: bool = True) -> list[TrialRecord]:
        rows = self.db.execute(
            "SELECT id, seq, tunnel, label, profile, workload, flows, direction, repetition, params, status, error,"
            " started_at, duration_s, clients, variant FROM trials WHERE run_id = ? ORDER BY seq",
            (run_id,),
        ).fetchall()
        out: list[TrialRecord] = []
        for r in rows:
            t = TrialRecord(
                id=r[0],
                seq=r[1],
                tunnel=r[2],
                label=r[3],
                profile=r[4],
                workload=r[5],
                flows=r[6],
                direction=r[7],
                repetition=r[8],
                params=json.loads(r[9]),
                status=r[10],
                error=r[11],
                started_at=r[12],
                duration_s=r[13],
                clients=r[14],
                variant=r[15],
            )
            t.metrics = dict(self.db.execute("SELECT name, value FROM metrics WHERE trial_id = ?", (t.id,)))
            t.streams = [
                (int(s[0]), str(s[1]), float(s[2]), s[3])
                for s in self.db.execute(
                    "SELECT stream, direction, received_bps, retransmits FROM streams WHERE trial_id = ?", (t.id,)
                )
            ]
            if with_series:
                for name, ts, val in self.db.execute(
                    "SELECT name, t_s, value FROM series WHERE trial_id = ? ORDER BY rowid", (t.id,)
                ):
                    t.series.setdefault(name, []).append((ts, val))
            out.append(t)
        return out

    def artifact(self, trial_id: int, name: str) -> bytes | None:
        row = self.db.execute("SELECT data FROM artifacts WHERE trial_id = ? AND name = ?", (trial_id, name)).fetchone()
        return zlib.decompress(row[0]) if row else None
