"""CSV export: one row per trial, fixed columns, empty cells for what was not measured."""

from __future__ import annotations

import csv
import io

import pytest

from tests.unit.report_data import demo_run, run, trial
from tunbench.report.exporters import csv as csv_format


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_one_row_per_trial_in_seq_order_across_runs() -> None:
    a, b = demo_run(rid=1, uid="tba", reps=3), demo_run(rid=2, uid="tbb", reps=2)
    out = rows(csv_format.render([a, b]))
    assert len(out) == len(a.trials) + len(b.trials)
    assert [r["run_uid"] for r in out] == ["tba"] * len(a.trials) + ["tbb"] * len(b.trials)
    assert [int(r["seq"]) for r in out[: len(a.trials)]] == sorted(t.seq for t in a.trials)


def test_values_round_trip_and_derived_columns() -> None:
    t = trial(1, "socat", 4e9, flows=4, cpu_client_s=1.0, window_s=2.0, extra={"latency.p50_ms": 0.25})
    (row,) = rows(csv_format.render([run([t])]))
    assert float(row["throughput_bps"]) == pytest.approx(4e9)
    assert float(row["client.cpu_pct"]) == pytest.approx(50.0)
    assert float(row["client.bits_per_cpu_s"]) == pytest.approx(8e9)
    assert row["server.cpu_pct"] == ""  # no server process: empty, not 0
    assert 0.9 < float(row["jain_index"]) < 1.0
    assert float(row["latency.p50_ms"]) == pytest.approx(0.25)  # extra metrics get their own column
    assert row["flows"] == "4" and row["direction"] == "up" and row["status"] == "ok"


def test_header_is_stable_and_failed_trials_have_empty_metrics() -> None:
    text = csv_format.render([run([trial(1, "socat", 0.0, status="failed")])])
    header = text.splitlines()[0].split(",")
    assert header[: len(csv_format.TRIAL_COLUMNS)] == list(csv_format.TRIAL_COLUMNS)
    (row,) = rows(text)
    assert row["status"] == "failed" and row["throughput_bps"] == ""
    assert row["error"].startswith("tunnel did not come up")
