"""The multi-client workloads' axes are fields of their own (Case/CaseKey/TrialRecord .clients and .variant):
stored (schema 2 moves the rows schema 1 kept in flows/direction), exported, read back from old exports,
and shown in the tables as before."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from tests.unit.report_data import run, trial
from tests.unit.store_data import new_run
from tunbench.report.compare import run_from_export
from tunbench.report.exporters import bmf
from tunbench.report.exporters import csv as csv_format
from tunbench.report.exporters import json as json_format
from tunbench.report.terminal import trial_headline, workload_tables
from tunbench.results import TrialRecord
from tunbench.store.db import Store
from tunbench.store.migrations import SCHEMA_VERSION


def storm(seq: int, n: int, variant: str, ready: float = 1.0) -> TrialRecord:
    t = trial(seq, "wireguard-go", 0.0, direction="-", extra={"clients.ready_count": n * ready})
    return replace(t, workload="storm", clients=n, variant=variant, streams=[], series={})


def clients(seq: int, n: int, direction: str) -> TrialRecord:
    t = trial(seq, "wireguard-go", 1e6 * n, direction=direction, extra={"clients.udp.aggregate_bps": 2e6 * n})
    return replace(t, workload="clients", clients=n, streams=[], series={})


def test_the_store_keeps_clients_and_variant(store_db: str | Path) -> None:
    with Store(store_db) as s:
        rid = new_run(s)
        s.add_trial(rid, storm(1, 50, "reconnect"))
        (t,) = s.trials(rid)
    assert (t.flows, t.direction, t.clients, t.variant) == (1, "-", 50, "reconnect")


def test_schema_2_moves_the_multi_client_rows_of_schema_1(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    Store(path).close()
    db = sqlite3.connect(path)
    with db:  # back to schema 1: no clients/variant columns; N in flows, a storm's variant in direction
        db.execute("ALTER TABLE trials DROP COLUMN cores")  # schema 6's
        db.execute("ALTER TABLE trials DROP COLUMN clients")
        db.execute("ALTER TABLE trials DROP COLUMN variant")
        db.execute("DROP INDEX runs_prefix")  # schema 4's
        db.execute("ALTER TABLE runs DROP COLUMN prefix")
        for col in ("owner_host", "owner_pid", "owner_started"):  # schema 3's
            db.execute(f"ALTER TABLE runs DROP COLUMN {col}")
        db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
        db.execute(
            "INSERT INTO runs (uid, started_at, status, tunbench_version, provenance, scenario_text, scenario_hash,"
            " scenario_json) VALUES ('tb000001', 't', 'done', '0', '{}', '', '', '{}')"
        )
        for seq, workload, flows, direction in [
            (1, "iperf3", 4, "up"),
            (2, "clients", 20, "down"),
            (3, "storm", 50, "overload"),
            (4, "latency", 1, "-"),
        ]:
            db.execute(
                "INSERT INTO trials (run_id, seq, tunnel, label, profile, workload, flows, direction, repetition,"
                " params, status, started_at) VALUES (1, ?, 'wg', 'wg', 'lan', ?, ?, ?, 1, '{}', 'ok', 't')",
                (seq, workload, flows, direction),
            )
    db.close()
    with Store(path) as s:
        assert s.schema_version() == SCHEMA_VERSION == 7
        got = {t.workload: (t.flows, t.direction, t.clients, t.variant) for t in s.trials(1)}
    assert got == {
        "iperf3": (4, "up", 1, ""),
        "clients": (1, "down", 20, ""),
        "storm": (1, "-", 50, "overload"),
        "latency": (1, "-", 1, ""),
    }


def test_json_and_csv_exports_carry_the_fields_and_old_exports_read_back() -> None:
    r = run([storm(1, 50, "connect"), clients(2, 20, "up")])
    doc = json.loads(json_format.render(r))
    assert [(t["clients"], t["variant"], t["flows"]) for t in doc["trials"]] == [(50, "connect", 1), (20, "", 1)]
    assert {(s["workload"], s["clients"], s["variant"]) for s in doc["summary"]} == {
        ("storm", 50, "connect"),
        ("clients", 20, ""),
    }
    assert [t.case for t in run_from_export(doc).trials] == [t.case for t in r.trials]
    rows = list(csv.DictReader(io.StringIO(csv_format.render([r]))))
    assert [(row["clients"], row["variant"]) for row in rows] == [("50", "connect"), ("20", "")]
    # an export from before the fields: N in flows, the storm's variant in direction
    for t in doc["trials"]:
        t["flows"], t["direction"] = t.pop("clients"), t.pop("variant") or t["direction"]
    old = run_from_export(doc).trials
    assert [(t.flows, t.direction, t.clients, t.variant) for t in old] == [(1, "-", 50, "connect"), (1, "up", 20, "")]


def test_tables_headlines_and_benchmark_names_read_as_before() -> None:
    trials = [storm(1, 50, "connect"), storm(2, 50, "reconnect", ready=0.5), clients(3, 5, "up"), clients(4, 20, "up")]
    console = Console(width=200, record=True)
    for table in workload_tables(trials):
        console.print(table)
    text = console.export_text()
    storm_head = next(ln for ln in text.splitlines() if "variant" in ln)
    assert storm_head.split()[:3] == ["tunnel", "variant", "clients"]
    assert any(ln.split()[:3] == ["wireguard-go", "reconnect", "50"] for ln in text.splitlines())
    clients_head = next(ln for ln in text.splitlines() if "UDP Mb/s" in ln)
    assert clients_head.split()[:3] == ["tunnel", "dir", "clients"]
    assert trial_headline(trials[1]).startswith("25/50 ready")
    assert trial_headline(trials[3]).startswith("20 clients · UDP 40 Mbit/s")
    # bencher's history is keyed by name: a storm case keeps the name it had when flows held N
    assert bmf.benchmark_name(trials[0].case) == "wireguard-go/lan/storm/connect/50-flows"
