"""The result store: SQLite (a file, the default) or PostgreSQL (a `postgresql://` URL), one schema for
both (schema.sql + migrations.py; backend.py holds the few dialect differences). Each trial is committed
the moment it ends, in its own transaction, so a killed run keeps what it measured and several machines
can write to one PostgreSQL database at once (run ids come from the database; run uids are random).

Each run row names its owner (host, pid, process start time): opening a store marks a `running` run of
this host whose owner is gone as `killed`. If PostgreSQL goes away during a run, what is measured from
then on goes to a local SQLite spool file and the run ends with a StoreLost naming the file and the
`tunbench db import` command that brings it back."""

from __future__ import annotations

import logging
import os
import shlex
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import psutil

from tunbench.errors import TunbenchError
from tunbench.results import RunRecord, TrialRecord
from tunbench.store.backend import (
    Backend,
    BackendError,
    SqliteBackend,
    is_url,
    looks_like_url,
    open_backend,
    redact,
)
from tunbench.store.migrations import MIGRATIONS, SCHEMA_VERSION
from tunbench.store.rows import ARTIFACTS, METRICS, PARTS, RUNS, SERIES, STREAMS, TRIALS

log = logging.getLogger(__name__)


class StoreError(TunbenchError):
    pass


class NoStore(StoreError):
    """--db names no store: a bad argument, exit status 2 (as an unknown run or reference), whichever command
    reads the store (`show`, `history`)."""

    exit_code = 2


class StoreLost(StoreError):
    """The database went away during a run; the rest of the run is in a local spool file."""


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def store_exists(db: str | Path) -> bool:
    """A URL may name a store (the server answers when it is opened); a path must exist. A URL-shaped value
    that is no PostgreSQL URL is no path either: opening it says why, with its password redacted (a caller's
    "no result store at ..." would echo it as written)."""
    return is_url(db) or looks_like_url(db) or Path(db).exists()


def require_store(db: str | Path) -> None:
    """A NoStore (exit 2) naming the path (a URL redacted) unless ``db`` may name a store (``store_exists``);
    creates nothing."""
    if not store_exists(db):
        raise NoStore(f"no result store at {redact(db)} (run `tunbench run` first, or pass --db PATH or URL)")


def process_owner() -> tuple[str, int, float]:
    """(host name, pid, process start time): who owns a run, so a reused pid is not taken for it."""
    me = psutil.Process()
    return socket.gethostname(), me.pid, me.create_time()


def owner_alive(pid: int, started: float | None) -> bool:
    try:
        p = psutil.Process(pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(p.create_time() - started) < 0.5
    except psutil.Error:
        return False


def new_spool_file(directory: Path, uid: str) -> Path:
    """A new, empty spool file `tunbench-spool-<uid>-<random>.db`, created exclusively (O_EXCL, mode 0600):
    never a file that was there before, such as one planted under a name known in advance."""
    fd, name = tempfile.mkstemp(prefix=f"tunbench-spool-{uid}-", suffix=".db", dir=directory)
    os.close(fd)
    return Path(name)


def recovery_command(spool: Path, db: str | Path) -> str:
    """The `tunbench db import` that brings a spool back, quoted for a shell (a socket URL has `?` and `&`),
    as a message may print it: when the URL has a password, the message says to put it back for ***."""
    where = redact(db)
    cmd = f"`tunbench db import {shlex.quote(str(spool))} --db {shlex.quote(where)}`"
    return cmd if where == str(db) else f"{cmd} with the password in place of ***"


def prefix_of(uid: str) -> str:
    """A run's name prefix from its uid: `tb3fa91c` from `tb3fa91c-0123...` (and from a uid of before schema
    4, which was the prefix itself)."""
    return uid.split("-", 1)[0]


def _trial_key(t: TrialRecord) -> tuple[str, str, str]:
    """What identifies a trial of a run besides its seq (import compares it)."""
    return (t.label, t.workload, t.started_at)


class Store:
    """A result store, opened (and brought to the current schema) for reading and writing; `read_only` (an
    SQLite file: what `db import` copies from) writes nothing to it: no migration (an older file is read
    through a migrated temporary copy) and no `killed` marks."""

    def __init__(self, db: str | Path, *, spool_dir: Path | None = None, read_only: bool = False) -> None:
        self.db = db
        self.path = db if is_url(db) else Path(db)
        self.where = redact(db)
        self.spool_dir = spool_dir
        self.spool: Store | None = None
        self.lost: StoreLost | None = None
        self._spool_ids: dict[int, int] = {}
        self._runs: dict[int, dict[str, Any]] = {}  # create_run's values by run id (to open the spool)
        self._stored: dict[int, int] = {}  # trials committed per run id
        self.opened_at_version: int | None = None  # the schema version found (None: a new store)
        self._copy_dir: tempfile.TemporaryDirectory[str] | None = None  # read_only: a migrated copy's
        self.killed_on_open: list[str] = []
        try:
            self.b: Backend = open_backend(db, read_only=read_only)
        except BackendError as e:
            if "not an SQLite database" in str(e):
                raise StoreError(f"{self.where} is not a tunbench result store ({e})") from e
            raise StoreError(f"cannot open result store {self.where}: {e}") from e
        try:
            if read_only:
                self._open_read_only()
            else:
                self._init_schema()
                self.killed_on_open = self.mark_killed()
        except BaseException:
            self.close()
            raise

    @property
    def dialect(self) -> str:
        return self.b.dialect

    def close(self) -> None:
        self.b.close()
        if self.spool is not None:
            self.spool.close()
        if self._copy_dir is not None:
            self._copy_dir.cleanup()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- schema ----------------------------------------------------------------------------------
    def schema_version(self) -> int | None:
        try:
            if "meta" not in self.b.tables():
                return None
            row = self.b.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except BackendError as e:
            raise StoreError(f"{self.where} is not a tunbench result store: {e}") from e
        return int(row[0]) if row else None

    def _init_schema(self) -> None:
        version = self.opened_at_version = self.schema_version()
        if version == SCHEMA_VERSION:
            return
        self._check_version(version)
        try:
            self.migrate()
        except BackendError as e:
            raise StoreError(f"cannot create or migrate the result store {self.where}: {e}") from e

    def _open_read_only(self) -> None:
        version = self.opened_at_version = self.schema_version()
        self._check_version(version)
        if version is None:
            raise StoreError(f"{self.where} is not a tunbench result store (empty)")
        if version == SCHEMA_VERSION:
            return
        source = self.b
        assert isinstance(source, SqliteBackend)
        self._copy_dir = tempfile.TemporaryDirectory(prefix="tunbench-import-")
        copy = Path(self._copy_dir.name) / "copy.db"
        try:
            source.copy_to(copy)
        except BackendError as e:
            raise StoreError(f"reading {self.where} failed: {e}") from e
        finally:
            source.close()
        self.b = open_backend(copy)
        try:
            self.migrate()
        except BackendError as e:
            raise StoreError(f"cannot migrate a copy of {self.where}: {e}") from e

    def _check_version(self, version: int | None) -> None:
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.where} has schema version {version}, newer than this tunbench understands "
                f"({SCHEMA_VERSION}); upgrade tunbench"
            )
        if version is None and self.b.tables():
            kind = "an SQLite file" if self.dialect == "sqlite" else "a PostgreSQL database with tables"
            raise StoreError(f"{self.where} is {kind} but not a tunbench store (no schema_version)")

    def migrate(self) -> tuple[int | None, int]:
        """Bring the store to SCHEMA_VERSION (create it when empty): (version before, version now). Under a
        schema lock, so writers that open a new PostgreSQL store at once create it once."""
        with self.b.transaction():
            self.b.schema_lock()
            version = self.schema_version()  # again: another writer may have done it meanwhile
            self._check_version(version)
            if version is None:
                sql = resources.files("tunbench.store").joinpath("schema.sql").read_text()
                self.b.script(sql)
                self.b.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                return None, SCHEMA_VERSION
            for v in range(version + 1, SCHEMA_VERSION + 1):
                if v not in MIGRATIONS:
                    raise StoreError(f"no migration from schema {v - 1} to {v}")
                step = MIGRATIONS[v]
                self.b.script(step if isinstance(step, str) else step[self.dialect])
                self.b.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(v),))
            return version, SCHEMA_VERSION

    def mark_killed(self) -> list[str]:
        """Mark `running` runs of this host whose owner process is gone as `killed`; their uids."""
        host = socket.gethostname()
        try:
            rows = self.b.execute(
                "SELECT id, uid, owner_pid, owner_started FROM runs WHERE status = 'running' AND owner_host = ?",
                (host,),
            ).fetchall()
            dead = [(r[0], r[1]) for r in rows if r[2] is not None and not owner_alive(int(r[2]), r[3])]
            if dead:
                with self.b.transaction():
                    for rid, _ in dead:
                        self.b.execute("UPDATE runs SET status = 'killed' WHERE id = ? AND status = 'running'", (rid,))
        except BackendError as e:
            raise StoreError(f"reading {self.where} failed: {e}") from e
        return [uid for _, uid in dead]

    @contextmanager
    def _tx(self) -> Iterator[Backend]:
        try:
            with self.b.transaction():
                yield self.b
        except BackendError as e:
            raise StoreError(f"writing to {self.where} failed: {e}") from e

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
        started_at: str | None = None,
    ) -> int:
        host, pid, started = process_owner()
        values: dict[str, Any] = {
            "uid": uid,
            "name": name,
            "started_at": started_at or now_iso(),
            "tunbench_version": tunbench_version,
            "provenance": provenance,
            "scenario_text": scenario_text,
            "scenario_hash": scenario_hash,
            "scenario": scenario,
        }
        run = RunRecord(id=0, finished_at=None, status="running", **values)
        with self._tx() as db:
            row = db.execute(RUNS.insert(), (*RUNS.values(run), host, pid, started, prefix_of(uid))).fetchone()
        run_id = int(row[0])
        self._runs[run_id] = values
        return run_id

    def update_provenance(self, run_id: int, provenance: dict[str, Any]) -> None:
        if run_id in self._runs:
            self._runs[run_id]["provenance"] = provenance
        self._write(run_id, "update_provenance", provenance)

    def finish_run(self, run_id: int, status: str) -> None:
        self._write(run_id, "finish_run", status)

    def add_trial(self, run_id: int, t: TrialRecord) -> int:
        tid = int(self._write(run_id, "add_trial", t))
        if self.spool is None:
            self._stored[run_id] = self._stored.get(run_id, 0) + 1
        return tid

    def _write(self, run_id: int, method: str, arg: Any) -> Any:
        """One write of a run, in its own transaction; once the server is gone, to the spool."""
        if self.spool is not None:
            return getattr(self.spool, method)(self._spool_ids[run_id], arg)
        try:
            with self.b.transaction():
                return getattr(self, f"_{method}")(run_id, arg)
        except BackendError as e:
            if not (e.lost and self.dialect == "postgresql" and run_id in self._runs):
                raise StoreError(f"writing to {self.where} failed: {e}") from e
            self._fail_over(run_id, e)
            return getattr(self.spool, method)(self._spool_ids[run_id], arg)

    def _fail_over(self, run_id: int, e: BackendError) -> None:
        values = self._runs[run_id]
        try:
            spool_path = new_spool_file(self.spool_dir or Path.cwd(), values["uid"])
            self.spool = Store(spool_path)
            self._spool_ids[run_id] = self.spool.create_run(**values)
        except (StoreError, OSError) as e2:
            raise StoreError(f"lost the result store {self.where} ({e}) and cannot spool to a file: {e2}") from e
        self.lost = StoreLost(
            f"lost the result store {self.where} during run {values['uid']} ({e}); its first "
            f"{self._stored.get(run_id, 0)} trial(s) are stored there, the rest went to {spool_path}: when the "
            f"server is back, run {recovery_command(spool_path, self.db)}"
        )
        log.warning(
            "lost the result store %s (%s): the rest of run %s goes to %s", self.where, e, values["uid"], spool_path
        )

    def _update_provenance(self, run_id: int, provenance: dict[str, Any]) -> None:
        col = RUNS.column("provenance")
        self.b.execute(f"UPDATE runs SET {col.name} = ? WHERE id = ?", (col.to_db(provenance), run_id))

    def _finish_run(self, run_id: int, status: str) -> None:
        self.b.execute("UPDATE runs SET status = ?, finished_at = ? WHERE id = ?", (status, now_iso(), run_id))

    def _add_trial(self, run_id: int, t: TrialRecord) -> int:
        row = self.b.execute(TRIALS.insert(), (*TRIALS.values(t), run_id)).fetchone()
        tid = int(row[0])
        for part in PARTS:
            self.b.executemany(part.insert(), part.rows(tid, t))
        t.id = tid
        return tid

    def import_run(self, run: RunRecord) -> tuple[int, int, bool]:
        """Copy a run from elsewhere (another store, a JSON export, a spool), keeping its uid: (its id here,
        trials added, whether the run was new here). A run already here gets only the trials (by seq) it
        lacks, so importing twice adds nothing; a run here still `running` or `killed` takes the imported
        run's status. The uid alone does not make it the same run: its start time and scenario, and every
        trial both have, must match too, else nothing is copied and a StoreError says what differs."""
        with self._tx() as db:
            row = db.execute(
                "SELECT id, status, started_at, scenario_hash FROM runs WHERE uid = ?", (run.uid,)
            ).fetchone()
            if row is None:
                # no owner: the process that wrote the run is another's
                row_values = (*RUNS.values(run), "", None, None, prefix_of(run.uid))
                rid = int(db.execute(RUNS.insert(), row_values).fetchone()[0])
                have: dict[int, tuple[str, str, str]] = {}
            else:
                rid = int(row[0])
                self._same_run(run, (str(row[2]), str(row[3])))
                have = {
                    int(r[0]): (str(r[1]), str(r[2]), str(r[3]))
                    for r in db.execute("SELECT seq, label, workload, started_at FROM trials WHERE run_id = ?", (rid,))
                }
                clash = [t.seq for t in run.trials if t.seq in have and have[t.seq] != _trial_key(t)]
                if clash:
                    raise StoreError(
                        f"run {run.uid}: trial(s) {', '.join(map(str, clash[:5]))} in {self.where} are not the "
                        "imported run's trials of the same seq (label, workload or start differ): two different "
                        "runs share this uid; nothing was copied"
                    )
                if row[1] in ("running", "killed") and run.status != "running":
                    db.execute(
                        "UPDATE runs SET status = ?, finished_at = ? WHERE id = ?", (run.status, run.finished_at, rid)
                    )
            new = [t for t in run.trials if t.seq not in have]
            for t in new:
                t = TrialRecord(**{**t.__dict__, "id": None})
                self._add_trial(rid, t)
        return rid, len(new), row is None

    def _same_run(self, run: RunRecord, here: tuple[str, str]) -> None:
        """Refuse to merge `run` into the run of the same uid here when they are not one run."""
        theirs = (run.started_at, run.scenario_hash)
        if theirs != here:
            raise StoreError(
                f"run {run.uid}: {self.where} has another run under this uid (started {here[0]}, scenario "
                f"{here[1][:12] or '-'}; the imported one started {theirs[0]}, scenario {theirs[1][:12] or '-'}): "
                "two different runs share this uid (a short uid of before schema 4 can); nothing was copied"
            )

    # ---- reading ---------------------------------------------------------------------------------
    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        try:
            return self.b.execute(sql, params).fetchall()
        except BackendError as e:
            raise StoreError(f"reading {self.where} failed: {e}") from e

    def runs(self) -> list[RunRecord]:
        return [RUNS.record_of(r) for r in self._read(f"{RUNS.select()} ORDER BY id")]

    def find_run(self, ref: str | None) -> RunRecord:
        """A run by id, uid, name or prefix (`tb3fa91c`); None means the latest."""
        select = RUNS.select()
        if ref is None or ref == "latest":
            rows = self._read(f"{select} ORDER BY id DESC LIMIT 1")
            if not rows:
                raise StoreError(f"no runs in {self.where} yet: `tunbench run` first")
        else:
            rows = []
            if ref.isdigit():
                rows = self._read(f"{select} WHERE id = ?", (int(ref),))
            if not rows:
                rows = self._read(f"{select} WHERE uid = ? OR name = ? ORDER BY id DESC LIMIT 1", (ref, ref))
            if not rows:  # the short prefix the run printed and named its namespaces with
                rows = self._read(f"{select} WHERE prefix = ? ORDER BY id DESC LIMIT 1", (ref,))
            if not rows:
                raise StoreError(f"no run {ref!r} in {self.where} (see `tunbench show --list`)")
        run = RUNS.record_of(rows[0])
        run.trials = self.trials(run.id)
        return run

    def full_run(self, run_id: int) -> RunRecord:
        """A run with everything stored for it, artifacts included (what `db import/export` copy)."""
        run = self.find_run(str(run_id))
        for t in run.trials:
            assert t.id is not None
            t.artifacts = self.artifacts(t.id)
        return run

    def trials(self, run_id: int, *, with_series: bool = True) -> list[TrialRecord]:
        """A run's trials in their order, each with its parts but its artifacts (``artifacts`` reads them);
        `with_series` False leaves its series out too."""
        out: list[TrialRecord] = []
        for row in self._read(f"{TRIALS.select()} WHERE run_id = ? ORDER BY seq", (run_id,)):
            t = TRIALS.record_of(row)
            for part in (METRICS, STREAMS, SERIES) if with_series else (METRICS, STREAMS):
                setattr(t, part.field, part.value(self._read(part.select(self.b.series_order), (t.id,))))
            out.append(t)
        return out

    def artifact(self, trial_id: int, name: str) -> bytes | None:
        rows = self._read("SELECT name, data FROM artifacts WHERE trial_id = ? AND name = ?", (trial_id, name))
        found: dict[str, bytes] = ARTIFACTS.value(rows)
        return found.get(name)

    def artifacts(self, trial_id: int) -> dict[str, bytes]:
        rows = self._read(ARTIFACTS.select(self.b.series_order), (trial_id,))
        return dict(ARTIFACTS.value(rows))
