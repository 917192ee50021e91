from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.pg import raw_sql
from tunbench.results import TrialRecord
from tunbench.store.db import Store, StoreError
from tunbench.store.migrations import SCHEMA_VERSION


def new_run(store: Store) -> int:
    return store.create_run(
        uid="tb000001",
        name="n",
        tunbench_version="0",
        provenance={"k": 1},
        scenario_text="[run]",
        scenario_hash="h",
        scenario={"run": {}},
    )


def trial(seq: int = 1) -> TrialRecord:
    return TrialRecord(
        seq=seq,
        tunnel="socat",
        label="socat",
        profile="lan",
        workload="iperf3",
        flows=2,
        direction="up",
        repetition=1,
        params={"a": 1},
        started_at="t",
        metrics={"throughput_bps": 1e9, "cpu.client.user_s": 0.5},
        series={"throughput_bps.up": [(1.0, 1e9), (2.0, 1.1e9)]},
        streams=[(5, "up", 5e8, 3), (7, "up", 5e8, None)],
        artifacts={"iperf3.json": b"{}"},
    )


def test_roundtrip(store_db: str | Path) -> None:
    with Store(store_db) as s:
        rid = new_run(s)
        tid = s.add_trial(rid, trial())
        s.finish_run(rid, "done")
    with Store(store_db) as s:
        run = s.find_run(None)
        assert run.status == "done" and run.provenance == {"k": 1}
        (t,) = run.trials
        assert t.metrics == {"throughput_bps": 1e9, "cpu.client.user_s": 0.5}
        assert t.series["throughput_bps.up"] == [(1.0, 1e9), (2.0, 1.1e9)]
        assert t.streams == [(5, "up", 5e8, 3), (7, "up", 5e8, None)]
        assert s.artifact(tid, "iperf3.json") == b"{}"
        assert s.find_run("tb000001").id == run.id and s.find_run("n").id == run.id
        with pytest.raises(StoreError, match="no run 'zzz'"):
            s.find_run("zzz")


def test_empty_store_says_what_to_do(store_db: str | Path) -> None:
    with Store(store_db) as s, pytest.raises(StoreError, match="tunbench run"):
        s.find_run(None)


def test_refuses_newer_schema(store_db: str | Path) -> None:
    Store(store_db).close()
    raw_sql(store_db, "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(StoreError, match="newer than this tunbench"):
        Store(store_db)


def test_refuses_foreign_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE x (a)")
    db.close()
    with pytest.raises(StoreError, match="not a tunbench store"):
        Store(path)


def test_refuses_foreign_postgresql_database(pg_url: str) -> None:
    raw_sql(pg_url, "CREATE TABLE x (a INTEGER)")
    with pytest.raises(StoreError, match="not a tunbench store"):
        Store(pg_url)
