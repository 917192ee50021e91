"""The store never mixes, loses or misplaces runs (issue 28, items 8-11): uids that do not collide and an
import that checks more than the uid; a --db value that looks like a URL is never a file; migrations that a
failure leaves at the version before; sources that `db import` only reads."""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from tests.pg import raw_sql
from tunbench.cli import app
from tunbench.cli.checks import check_store_path
from tunbench.errors import TunbenchError
from tunbench.host.ledger import PREFIX_RE, new_prefix, new_uid
from tunbench.results import TrialRecord
from tunbench.store import db as db_mod
from tunbench.store.backend import redact, sql_statements
from tunbench.store.db import Store, StoreError
from tunbench.store.migrations import MIGRATIONS, SCHEMA_VERSION


def new_run(store: Store, uid: str, *, started_at: str = "2026-01-01T00:00:00+00:00", scenario: str = "h") -> int:
    return store.create_run(
        uid=uid, name="n", tunbench_version="0", provenance={}, scenario_text="[run]", scenario_hash=scenario,
        scenario={}, started_at=started_at,
    )  # fmt: skip


def trial(seq: int, tunnel: str = "wireguard-go") -> TrialRecord:
    return TrialRecord(
        seq=seq, tunnel=tunnel, label=tunnel, profile="lan", workload="iperf3", flows=1, direction="up",
        repetition=seq, params={}, started_at=f"t{seq}", metrics={"throughput_bps": 1e9},
    )  # fmt: skip


def said(res: Result) -> str:
    """What a command said: its output, and the error the CLI prints as `Error: ...`."""
    return res.output + ("" if res.exception is None else str(res.exception))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---- 8: uids that never collide, and an import that checks more than the uid -------------------------------


def test_a_uid_is_long_and_starts_with_its_short_prefix() -> None:
    prefix = new_prefix()
    uid = new_uid(prefix)
    assert PREFIX_RE.match(prefix) and re.fullmatch(rf"{prefix}-[0-9a-f]{{20}}", uid)
    assert db_mod.prefix_of(uid) == prefix and db_mod.prefix_of("tb3fa91c") == "tb3fa91c"  # an old uid
    uids = {new_uid("tb000000") for _ in range(10_000)}  # one prefix for all: the suffix alone tells them apart
    assert len(uids) == 10_000


def test_a_run_is_found_by_uid_and_by_its_prefix(store_db: str | Path) -> None:
    uid = new_uid("tb3fa91c")
    with Store(store_db) as s:
        rid = new_run(s, uid)
        assert s.find_run(uid).id == s.find_run("tb3fa91c").id == rid


def test_import_refuses_another_run_under_the_same_uid(store_db: str | Path, tmp_path: Path) -> None:
    """Issue 28 #8: a wireguard run (3 trials) and an openvpn run (5 trials) under one short uid; importing
    the second once appended openvpn's trials 3-4 to the wireguard run and dropped 0-2 without a word."""
    with Store(store_db) as s:
        rid = new_run(s, "tbc0ffee", started_at="2026-01-01T00:00:00+00:00", scenario="wg")
        for seq in range(3):
            s.add_trial(rid, trial(seq, "wireguard-go"))
    other = tmp_path / "other.db"
    with Store(other) as o:
        rid = new_run(o, "tbc0ffee", started_at="2026-02-02T00:00:00+00:00", scenario="ovpn")
        for seq in range(5):
            o.add_trial(rid, trial(seq, "openvpn-udp"))
    res = CliRunner().invoke(app, ["db", "import", str(other), "--db", str(store_db)])
    assert res.exit_code != 0
    assert "another run under this uid" in said(res) and "nothing was copied" in said(res), said(res)
    with Store(store_db) as s:
        run = s.find_run("tbc0ffee")
    assert [(t.seq, t.tunnel) for t in run.trials] == [(i, "wireguard-go") for i in range(3)]


def test_import_refuses_trials_that_differ_under_one_seq(store_db: str | Path, tmp_path: Path) -> None:
    with Store(store_db) as s:
        s.add_trial(new_run(s, "tbc0ffee"), trial(0, "wireguard-go"))
    other = tmp_path / "other.db"
    with Store(other) as o:  # same uid, start and scenario, yet trial 0 is another trial
        s_rid = new_run(o, "tbc0ffee")
        o.add_trial(s_rid, trial(0, "openvpn-udp"))
        o.add_trial(s_rid, trial(1, "openvpn-udp"))
    res = CliRunner().invoke(app, ["db", "import", str(other), "--db", str(store_db)])
    assert res.exit_code != 0 and "trial(s) 0" in said(res), said(res)
    with Store(store_db) as s:
        assert [t.tunnel for t in s.find_run("tbc0ffee").trials] == ["wireguard-go"]


def test_schema_4_gives_old_runs_their_uid_as_prefix(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Store(path) as s:
        new_run(s, "tb3fa91c")
    db = sqlite3.connect(path)
    with db:  # back to schema 3
        db.execute("DROP INDEX runs_prefix")
        db.execute("ALTER TABLE runs DROP COLUMN prefix")
        db.execute("ALTER TABLE trials DROP COLUMN cores")  # schema 6's
        db.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    db.close()
    with Store(path) as s:
        assert s.opened_at_version == 3 and s.schema_version() == SCHEMA_VERSION == 7
        assert s.find_run("tb3fa91c").uid == "tb3fa91c"
    assert raw_sql(path, "SELECT uid, prefix FROM runs") == [("tb3fa91c", "tb3fa91c")]


# ---- 9: a URL is never a file ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql:///tunbench", "postgresql:///tunbench"),  # the local socket: no host at all
        ("postgresql:///tunbench?host=/run/postgresql&user=b", "postgresql:///tunbench?host=/run/postgresql&user=b"),
        ("postgresql://u:secret@h/db", "postgresql://u:***@h/db"),
        ("postgres://u:s%40c@h:5433/db", "postgres://u:***@h:5433/db"),
        ("postgresql://h/db?user=u&password=secret", "postgresql://h/db?user=u&password=***"),
        ("postgresql://h/db?sslpassword=secret&sslmode=require", "postgresql://h/db?sslpassword=***&sslmode=require"),
        ("postgresql:///db?password=a&sslpassword=b", "postgresql:///db?password=***&sslpassword=***"),
        ("results/tunbench.db", "results/tunbench.db"),
    ],
)
def test_redact_hides_passwords_and_keeps_the_url_a_url(url: str, shown: str) -> None:
    assert redact(url) == shown


@pytest.mark.parametrize("db", ["postgresql:/tunbench", "postgresq://h/db", "sqlite:///r.db", "file:/tmp/r.db"])
def test_a_url_that_is_not_postgresql_is_never_a_file(db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="looks like a URL"):
        Store(db)
    with pytest.raises(TunbenchError, match="looks like a URL"):
        check_store_path(db)
    res = CliRunner().invoke(app, ["db", "migrate", "--db", db])
    assert res.exit_code != 0 and "looks like a URL" in said(res)
    assert list(tmp_path.iterdir()) == []  # no directory `postgresql:`, no file


# ---- 10: migrations are atomic --------------------------------------------------------------------------


def test_sql_statements_splits_a_script_as_sqlite_does() -> None:
    assert sql_statements("-- a; comment\nALTER TABLE t ADD COLUMN x;\nUPDATE t SET x = ';';\n-- end\n") == [
        "-- a; comment\nALTER TABLE t ADD COLUMN x;",
        "UPDATE t SET x = ';';",
    ]


def test_an_interrupted_migration_leaves_the_version_before(
    store_db: str | Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A migration that fails after its first statement: nothing of it stays (executescript committed the
    ALTER TABLE, and every later open then failed with "duplicate column name"), and it runs again."""
    with Store(store_db) as s:
        new_run(s, "tb000001")
    nxt = SCHEMA_VERSION + 1
    monkeypatch.setattr(db_mod, "SCHEMA_VERSION", nxt)
    good = "ALTER TABLE runs ADD COLUMN extra TEXT NOT NULL DEFAULT '';\nUPDATE runs SET extra = uid;\n"
    monkeypatch.setitem(MIGRATIONS, nxt, good + "SELECT * FROM no_such_table;\n")
    with pytest.raises(StoreError, match="no_such_table"):
        Store(store_db)
    assert raw_sql(store_db, "SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    monkeypatch.setitem(MIGRATIONS, nxt, good)
    with Store(store_db) as s:
        assert s.opened_at_version == SCHEMA_VERSION and s.schema_version() == nxt
    assert raw_sql(store_db, "SELECT extra FROM runs") == [("tb000001",)]


def test_an_interrupt_during_a_migration_rolls_it_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C between two statements of a migration (not an SQL error: a KeyboardInterrupt)."""
    path = tmp_path / "r.db"
    Store(path).close()
    nxt = SCHEMA_VERSION + 1
    monkeypatch.setattr(db_mod, "SCHEMA_VERSION", nxt)
    monkeypatch.setitem(MIGRATIONS, nxt, "ALTER TABLE runs ADD COLUMN extra TEXT;\nUPDATE runs SET extra = '';\n")
    real = sqlite3.Connection.execute
    seen: list[str] = []

    class Conn(sqlite3.Connection):
        def execute(self, sql: str, *a: object) -> sqlite3.Cursor:  # type: ignore[override]
            seen.append(sql)
            if sql.startswith("UPDATE runs SET extra"):
                raise KeyboardInterrupt
            return real(self, sql, *a)  # type: ignore[arg-type]

    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: connect(*a, **k, factory=Conn))
    with pytest.raises(KeyboardInterrupt):
        Store(path)
    monkeypatch.setattr(sqlite3, "connect", connect)
    assert any(s.startswith("ALTER TABLE runs ADD COLUMN extra") for s in seen)
    cols = [r[1] for r in raw_sql(path, "PRAGMA table_info(runs)")]
    assert "extra" not in cols
    with Store(path) as s:
        assert s.schema_version() == nxt


# ---- 11: db import only reads its sources ----------------------------------------------------------------


def test_import_reads_its_sources_and_writes_nothing_to_them(tmp_path: Path) -> None:
    """An older source (schema 3) is neither migrated nor marked: its `running` run whose process is gone
    stays `running` there (the import reads a migrated copy)."""
    src = tmp_path / "src.db"
    with Store(src) as s:
        rid = new_run(s, "tbaaaaaa")
        s.add_trial(rid, trial(1))
    db = sqlite3.connect(src)
    with db:
        db.execute("DROP INDEX runs_prefix")
        db.execute("ALTER TABLE runs DROP COLUMN prefix")
        db.execute("ALTER TABLE trials DROP COLUMN cores")  # schema 6's
        db.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
        db.execute("UPDATE runs SET owner_pid = 999999999, owner_started = 1.0")  # a process that is gone
    db.execute("PRAGMA journal_mode = DELETE")
    db.close()
    before = digest(src)
    files = sorted(p.name for p in tmp_path.iterdir())
    res = CliRunner().invoke(app, ["db", "import", str(src), "--db", str(tmp_path / "to.db")])
    assert res.exit_code == 0, res.output
    assert digest(src) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "to.db" and not p.name.startswith("to.db-")) == files
    assert raw_sql(src, "SELECT status FROM runs") == [("running",)]
    with Store(tmp_path / "to.db") as s:
        run = s.find_run("tbaaaaaa")
        assert [t.seq for t in run.trials] == [1]


def test_a_read_only_store_cannot_be_written(tmp_path: Path) -> None:
    src = tmp_path / "src.db"
    Store(src).close()
    with Store(src, read_only=True) as s, pytest.raises(StoreError, match="readonly"):
        new_run(s, "tbaaaaaa")


def test_a_spool_file_is_created_new(tmp_path: Path) -> None:
    planted = tmp_path / "tunbench-spool-tbaaaaaa.db"
    planted.symlink_to(tmp_path / "elsewhere")
    paths = {db_mod.new_spool_file(tmp_path, "tbaaaaaa") for _ in range(3)}
    assert len(paths) == 3 and planted not in paths and not (tmp_path / "elsewhere").exists()
    assert all(p.stat().st_size == 0 and p.stat().st_mode & 0o777 == 0o600 for p in paths)
    assert all(os.path.basename(p).startswith("tunbench-spool-tbaaaaaa-") for p in paths)
