"""Issue 43 item 8: a NaN in a trial's time series aborted the trial's write (series.value was NOT NULL, and
SQLite binds NaN as NULL): the whole trial was lost. The store keeps what is finite and marks each gap (a
non-finite value) with NULL, which reads back as NaN, the gap marker every reader of series skips; a point
without a finite time cannot be placed and is left out."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

from tests.pg import raw_sql
from tunbench.report.exporters.json import render, run_from_export
from tunbench.results import TrialRecord
from tunbench.store.db import Store
from tunbench.store.migrations import SCHEMA_VERSION

NAN, INF = float("nan"), float("inf")


def _trial(seq: int, series: dict[str, list[tuple[float, float]]]) -> TrialRecord:
    return TrialRecord(
        seq=seq, tunnel="wireguard-go", label="wireguard-go", profile="lan", workload="iperf3", flows=1,
        direction="up", repetition=seq, params={}, started_at=f"t{seq}", metrics={"throughput_bps": 1e9},
        series=series,
    )  # fmt: skip


def _run(s: Store) -> int:
    return s.create_run(
        uid="tbc0ffee", name="n", tunbench_version="0", provenance={}, scenario_text="", scenario_hash="", scenario={}
    )


def _same(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> bool:
    """Equal point by point, NaN (a gap) equal to NaN."""
    return len(a) == len(b) and all(
        x[0] == y[0] and (x[1] == y[1] or (math.isnan(x[1]) and math.isnan(y[1]))) for x, y in zip(a, b, strict=True)
    )


GAPPY = {
    "cpu_pct.client": [(0.0, 10.0), (0.1, NAN), (0.2, INF), (0.3, 12.0), (0.4, -INF)],
    "throughput_bps.up": [(1.0, 9e8), (NAN, 9.1e8), (3.0, 9.2e8)],
}


def test_a_nan_in_a_series_stores_the_trial_with_its_gaps(store_db: str | Path) -> None:
    with Store(store_db) as s:
        rid = _run(s)
        s.add_trial(rid, _trial(1, {"cpu_pct.client": [(0.0, 1.0), (0.1, 2.0)]}))
        s.add_trial(rid, _trial(2, GAPPY))  # aborted here before: NOT NULL constraint failed: series.value
        s.finish_run(rid, "done")
    with Store(store_db) as s:
        run = s.find_run("tbc0ffee")
    assert [t.seq for t in run.trials] == [1, 2] and run.trials[1].metrics["throughput_bps"] == 1e9
    got = run.trials[1].series
    # every finite value as it was; NaN and +-inf are gaps (NaN), in place
    assert _same(got["cpu_pct.client"], [(0.0, 10.0), (0.1, NAN), (0.2, NAN), (0.3, 12.0), (0.4, NAN)])
    assert got["throughput_bps.up"] == [(1.0, 9e8), (3.0, 9.2e8)]  # a point with no time cannot be placed
    # a gap is NULL in the store, never a NaN or an infinity a reader of the SQL would take for a value
    stored = raw_sql(store_db, "SELECT t_s, value FROM series WHERE name = 'cpu_pct.client' ORDER BY trial_id, t_s")
    assert [v for _, v in stored] == [1.0, 2.0, 10.0, None, None, 12.0, None]


def test_a_series_with_gaps_goes_through_a_json_export_and_back(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as s:
        rid = _run(s)
        s.add_trial(rid, _trial(1, GAPPY))
        s.finish_run(rid, "done")
        run = s.find_run("tbc0ffee")
    text = render(run)  # strict JSON (no NaN): a gap is null
    doc = json.loads(text)
    assert doc["trials"][0]["series"]["cpu_pct.client"][1] == [0.1, None]
    back = run_from_export(doc, source="x.json")
    assert _same(back.trials[0].series["cpu_pct.client"], run.trials[0].series["cpu_pct.client"])
    with Store(tmp_path / "copy.db") as c:  # and into another store (db import)
        c.import_run(back)
        again = c.find_run("tbc0ffee").trials[0].series
    assert _same(again["cpu_pct.client"], run.trials[0].series["cpu_pct.client"])


def test_a_store_of_schema_4_is_migrated_in_order_and_then_takes_gaps(store_db: str | Path) -> None:
    with Store(store_db) as s:
        rid = _run(s)
        s.add_trial(rid, _trial(1, {"x": [(2.0, 1.0), (1.0, 2.0), (3.0, 3.0)]}))  # not in time order
    if isinstance(store_db, Path):
        db = sqlite3.connect(store_db)
        with db:  # back to schema 4: series.value NOT NULL (SQLite cannot add it: the table as it was)
            db.execute("DROP TABLE series")
            db.execute(
                "CREATE TABLE series (trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,"
                " name TEXT NOT NULL, t_s REAL NOT NULL, value REAL NOT NULL)"
            )
            db.execute("CREATE INDEX series_trial ON series(trial_id)")
            db.executemany("INSERT INTO series VALUES (1, 'x', ?, ?)", [(2.0, 1.0), (1.0, 2.0), (3.0, 3.0)])
            db.execute("ALTER TABLE trials DROP COLUMN cores")  # schema 6's
            db.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
        db.close()
    else:
        raw_sql(store_db, "ALTER TABLE series ALTER COLUMN value SET NOT NULL")
        raw_sql(store_db, "ALTER TABLE trials DROP COLUMN cores")  # schema 6's
        raw_sql(store_db, "UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    with Store(store_db) as s:
        assert s.opened_at_version == 4 and s.schema_version() == SCHEMA_VERSION
        first = s.find_run("tbc0ffee").trials[0].series["x"]
        if isinstance(store_db, Path):  # SQLite reads a series back in the order it was written (PostgreSQL: by time)
            assert first == [(2.0, 1.0), (1.0, 2.0), (3.0, 3.0)]
        s.add_trial(rid, _trial(2, {"x": [(0.0, NAN)]}))
        assert _same(s.find_run("tbc0ffee").trials[1].series["x"], [(0.0, NAN)])
    if isinstance(store_db, Path):
        indexes = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'series'"
        assert raw_sql(store_db, indexes) == [("series_trial",)]


def test_every_report_reads_a_series_with_gaps(tmp_path: Path) -> None:
    """The readers of series skip a gap: the HTML page (its time-series charts leave a hole), CSV, Markdown,
    BMF."""
    from tunbench.report.exporters import bmf, csv, markdown
    from tunbench.report.html import page

    with Store(tmp_path / "r.db") as s:
        rid = _run(s)
        for seq in (1, 2):
            s.add_trial(rid, _trial(seq, {"throughput_bps.up": [(0.0, 9e8), (1.0, NAN), (2.0, 9.2e8)]}))
        s.finish_run(rid, "done")
        run = s.find_run("tbc0ffee")
    html = page.render([run])
    assert "wireguard-go" in html and "NaN" not in html.split("<script", 1)[0]
    for mod in (csv, markdown, bmf):
        assert mod.render([run])


# ---- a stream's rate: the same NOT NULL lost a trial whose stream rate was NaN (schema 7) ----------------


def _with_streams(seq: int) -> TrialRecord:
    t = _trial(seq, {})
    t.streams = [(0, "up", 5e8, 3), (1, "up", NAN, None), (2, "up", INF, 0)]
    return t


def _rates(t: TrialRecord) -> list[float]:
    return [bps for _, _, bps, _ in t.streams]


def test_a_nan_stream_rate_stores_the_trial_as_null(store_db: str | Path) -> None:
    with Store(store_db) as s:
        rid = _run(s)
        s.add_trial(rid, _with_streams(1))  # aborted here before: NOT NULL constraint failed: streams.received_bps
        s.finish_run(rid, "done")
    with Store(store_db) as s:
        run = s.find_run("tbc0ffee")
    (t,) = run.trials
    assert t.metrics["throughput_bps"] == 1e9 and [(n, r) for n, _, _, r in t.streams] == [(0, 3), (1, None), (2, 0)]
    assert _rates(t)[0] == 5e8 and all(math.isnan(x) for x in _rates(t)[1:])  # NaN, as a series' gap
    stored = raw_sql(store_db, "SELECT stream, received_bps FROM streams ORDER BY stream")
    assert stored == [(0, 5e8), (1, None), (2, None)]  # NULL, never a NaN or an infinity
    doc = json.loads(render(run))  # strict JSON (no NaN): null
    assert [x["received_bps"] for x in doc["trials"][0]["streams"]] == [5e8, None, None]
    back = run_from_export(doc, source="x.json").trials[0]
    assert _rates(back)[0] == 5e8 and math.isnan(_rates(back)[1])


def test_a_store_of_schema_6_is_migrated_and_then_takes_a_nan_rate(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Store(path) as s:
        _run(s)
    db = sqlite3.connect(path)
    with db:  # back to schema 6: streams.received_bps NOT NULL (SQLite cannot add it: the table as it was)
        db.execute("DROP TABLE streams")
        db.execute(
            "CREATE TABLE streams (trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,"
            " stream INTEGER NOT NULL, direction TEXT NOT NULL, received_bps REAL NOT NULL, retransmits INTEGER)"
        )
        db.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    db.close()
    with Store(path) as s:
        assert s.opened_at_version == 6 and s.schema_version() == SCHEMA_VERSION == 7
        s.add_trial(1, _with_streams(1))
        assert math.isnan(_rates(s.find_run("tbc0ffee").trials[0])[1])
