"""The JSON export carries every field the format promises (docs/json-format.md), for synthetic trials."""

from __future__ import annotations

import json

import pytest

from tunbench.report.exporters.json import JSON_SCHEMA, render
from tunbench.results import RunRecord, TrialRecord


def trial(seq: int, label: str, bps: float, rep: int, cpu: float = 0.5) -> TrialRecord:
    metrics: dict[str, float | None] = {"throughput_bps": bps, "retransmits": 3, "window_s": 2.0, "setup_s": 0.1}
    if label != "direct":
        for role in ("client", "server"):
            metrics |= {
                f"cpu.{role}.user_s": cpu,
                f"cpu.{role}.sys_s": cpu,
                f"processes.{role}": 1,
                f"rss_peak_bytes.{role}": 1e7,
            }
    return TrialRecord(
        seq=seq,
        tunnel=label,
        label=label,
        profile="lan",
        workload="iperf3",
        flows=1,
        direction="up",
        repetition=rep,
        params={},
        metrics=metrics,
        window_s=2.0,
        streams=[(5, "up", bps, 3)],
    )


def run(trials: list[TrialRecord]) -> RunRecord:
    return RunRecord(
        id=1,
        uid="tb000001",
        name="",
        started_at="s",
        finished_at="f",
        status="done",
        tunbench_version="0.1.0",
        provenance={"host": {}},
        scenario_text="",
        scenario_hash="h",
        scenario={},
        trials=trials,
    )


def test_required_fields_and_derived_figures() -> None:
    trials = [trial(i * 2 + 1, "direct", 10e9 + i * 1e8, i + 1) for i in range(3)]
    trials += [trial(i * 2 + 2, "wg", 1e9 + i * 1e7, i + 1) for i in range(3)]
    doc = json.loads(render(run(trials)))
    assert doc["schema"] == JSON_SCHEMA == 1
    assert {"run", "trials", "summary"} <= set(doc)
    t = next(t for t in doc["trials"] if t["label"] == "wg")
    for key in (
        "tunnel",
        "label",
        "profile",
        "workload",
        "flows",
        "direction",
        "repetition",
        "status",
        "throughput_bps",
        "retransmits",
        "cpu",
        "trial_cpu",
        "checks",
        "rss_peak_bytes",
        "duration_s",
    ):
        assert key in t, key
    assert t["cpu"]["client"] == {"user_s": 0.5, "sys_s": 0.5}
    (wg,) = [s for s in doc["summary"] if s["label"] == "wg"]
    for key in (
        "tunnel",
        "label",
        "profile",
        "workload",
        "flows",
        "direction",
        "n",
        "throughput_bps",
        "ratio_to_direct",
        "bits_per_cpu_second",
    ):
        assert key in wg, key
    assert wg["n"] == 3
    assert wg["throughput_bps"]["median"] == pytest.approx(1.01e9)
    assert wg["throughput_bps"]["min"] == pytest.approx(1e9) and wg["throughput_bps"]["max"] == pytest.approx(1.02e9)
    assert wg["ratio_to_direct"]["value"] == pytest.approx(1.01e9 / 10.1e9)
    # 1 CPU-second per 2-second window = half a core: bits per CPU-second = throughput / 0.5
    assert wg["bits_per_cpu_second"]["client"] == pytest.approx(2 * 1.01e9)
    (direct,) = [s for s in doc["summary"] if s["label"] == "direct"]
    assert direct["ratio_to_direct"] is None
    assert direct["bits_per_cpu_second"] == {"client": None, "server": None}


def test_failed_trials_are_counted_not_averaged() -> None:
    bad = trial(3, "wg", 0.0, 3)
    bad.status, bad.error, bad.metrics = "failed", "wg: not ready after 20 s", {}
    doc = json.loads(render(run([trial(1, "wg", 1e9, 1), trial(2, "wg", 2e9, 2), bad])))
    (s,) = doc["summary"]
    assert s["n"] == 2 and s["n_failed"] == 1
    assert s["throughput_bps"]["median"] == pytest.approx(1.5e9)
    assert doc["trials"][2]["error"] == "wg: not ready after 20 s"


def test_series_survive_an_export_and_a_reload() -> None:
    from tunbench.report.compare import run_from_export

    t = trial(1, "wg", 1e9, 1)
    t.series = {"throughput_bps.up": [(1.0, 9.9e8), (2.0, 1.01e9)], "cpu_pct.client": [(0.1, 50.0)]}
    doc = json.loads(render(run([t])))
    assert doc["trials"][0]["series"]["throughput_bps.up"] == [[1.0, 9.9e8], [2.0, 1.01e9]]
    back = run_from_export(doc)
    assert back.trials[0].series == t.series
    # the measured window is exported under the field name older exports have, and reads back
    assert doc["trials"][0]["duration_s"] == t.window_s == back.trials[0].window_s == 2.0
