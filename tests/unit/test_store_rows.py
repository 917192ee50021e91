"""store/rows.py: one mapping per record type, and it is whole. Every field of a run and of a trial is a
column of its table or a part of its own, every column of the tables is a field's or the store's own, and a
record with every field set comes back from either backend as it went in."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from tunbench.results import RunRecord, TrialRecord
from tunbench.store.db import Store
from tunbench.store.rows import PARTS, RUNS, TRIALS, Rows


def table_columns(db: str | Path, table: str) -> set[str]:
    with Store(db) as s:
        cur: Any = s.b.execute(f"SELECT * FROM {table} LIMIT 0")
        cur.fetchall()
        return {str(d[0]) for d in cur.description}


def mismatch(rows: Rows[Any], have: set[str]) -> set[str]:
    """What a mapping and its table disagree on: columns one has and the other lacks, and fields no column
    or part holds."""
    mapped = {c.name for c in rows.columns} | set(rows.own)
    return (mapped ^ have) | rows.unmapped()


def test_every_field_and_every_column_is_mapped(store_db: str | Path) -> None:
    for rows in (RUNS, TRIALS):
        assert mismatch(rows, table_columns(store_db, rows.table)) == set(), rows.table
    for part in PARTS:
        assert table_columns(store_db, part.table) == {"trial_id", *part.columns}, part.table


@dataclasses.dataclass
class _Wider(TrialRecord):
    """A trial with a field added and no column for it."""

    jitter_ms: float = 0.0


def test_a_field_added_to_a_record_without_its_column_is_caught(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    wider = Rows.of("trials", _Wider, renamed={"window_s": "duration_s"}, elsewhere=TRIALS.elsewhere, own=TRIALS.own)
    assert mismatch(wider, table_columns(db, "trials")) == {"jitter_ms"}
    # a mapping that leaves a field out, rather than naming a column for it, is caught too
    narrower = dataclasses.replace(TRIALS, columns=tuple(c for c in TRIALS.columns if c.field != "variant"))
    assert narrower.unmapped() == {"variant"}
    assert "variant" in mismatch(narrower, table_columns(db, "trials"))


def _full_trial() -> TrialRecord:
    """A trial with no field at its default."""
    return TrialRecord(
        seq=4, tunnel="wireguard-go", label="wg", profile="wan-50ms", workload="clients", flows=2,
        direction="down", repetition=3, params={"mtu": 1400, "cpuset": [0, 1]}, clients=8, variant="connect",
        status="failed", error="handshake timed out", started_at="2026-01-01T00:00:05+00:00", window_s=2.5,
        metrics={"throughput_bps": 1.5e9, "cpu.client.user_s": None},
        series={"throughput_bps.down": [(0.5, 1.0e9), (1.5, math.nan)], "cpu_pct.server": [(0.1, 40.0)]},
        streams=[(5, "down", 7.5e8, 2), (7, "down", 7.5e8, None)],
        artifacts={"iperf3.json": b'{"end": {}}', "client.log": b"up"},
    )  # fmt: skip


def _same(a: object, b: object) -> bool:
    """Equal, NaN equal to NaN (a series gap reads back as NaN)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_a_run_and_a_trial_come_back_with_every_field(store_db: str | Path) -> None:
    run = RunRecord(
        id=0, uid="tb00beef-0123456789abcdef0123", name="full", started_at="2026-01-01T00:00:00+00:00",
        finished_at="2026-01-01T00:10:00+00:00", status="done", tunbench_version="9.9", provenance={"host": "h"},
        scenario_text="[run]\nrepeat = 3\n", scenario_hash="abc", scenario={"run": {"repeat": 3}},
        trials=[_full_trial()],
    )  # fmt: skip
    with Store(store_db) as s:
        rid, added, new = s.import_run(run)
        back = s.full_run(rid)
    assert (added, new) == (1, True)
    want = {**dataclasses.asdict(run), "id": rid, "trials": []}
    assert {**dataclasses.asdict(back), "trials": []} == want
    (t,) = back.trials
    assert t.id is not None
    assert _same(dataclasses.asdict(t), {**dataclasses.asdict(_full_trial()), "id": t.id})
