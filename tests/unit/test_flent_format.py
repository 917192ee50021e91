"""Flent's data format (report/exporters/flent.py): an rrul trial written as Flent's RRUL data file and
read back into the figures tunbench compares. The trial is built by the rrul workload's own functions from
committed irtt and iperf3 outputs, so its series have the keys a real trial stores."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tunbench.errors import ExportError
from tunbench.metrics import core
from tunbench.metrics.latency import PHASE
from tunbench.report.exporters import by_suffix, flent
from tunbench.results import RunRecord, TrialRecord
from tunbench.stats import percentile
from tunbench.workloads import iperf3, irtt, rrul
from tunbench.workloads.base import Measurement

DATA = Path(__file__).parent.parent / "data"
T0_S = 3.0  # the load's measured seconds start this long after the workload's (series_t0_s)


def _trial(seq: int = 1, workload: str = "rrul", summary: str = "tunbench") -> TrialRecord:
    idle = irtt.parse((DATA / "irtt-loss10-delay5ms.json").read_text())
    loaded = irtt.parse((DATA / "irtt-wan-50ms.json").read_text())
    load = iperf3.parse((DATA / "iperf3-rrul-bidir-wireguard-go.json").read_text(), "bidir")
    m = Measurement()  # as RrulWorkload.measure fills it
    m.metrics.update(rrul.phase_metrics(idle, loaded, idle, load))
    if summary == "flent":
        m.metrics.update(rrul.whole_metrics(idle, loaded, idle))
    m.series[rrul.SERIES_IDLE] = irtt.rtt_series(idle)
    m.series[rrul.SERIES_AFTER] = irtt.rtt_series(idle)
    m.series[rrul.SERIES_LOADED] = irtt.rtt_series(loaded)
    iperf3.add_flows(m, load)
    metrics = {**m.metrics, core.SERIES_T0_S.name: T0_S}
    return TrialRecord(
        seq=seq,
        tunnel="wireguard-go",
        label="wireguard-go",
        profile="wan-50ms",
        workload=workload,
        flows=1,
        direction="bidir",
        repetition=0,
        params={"workload": {"kind": "rrul", "duration_s": 2.0, "omit_s": 1.0, "idle_s": 0.5, "summary": summary}},
        started_at="2026-11-28T22:00:00+00:00",
        metrics=metrics,
        series=m.series,
    )


def _run(*trials: TrialRecord) -> RunRecord:
    return RunRecord(
        id=1,
        uid="r1",
        name="",
        started_at="2026-11-28T21:59:00+00:00",
        finished_at=None,
        status="done",
        tunbench_version="0.0",
        provenance={"hostname": "box"},
        scenario_text="",
        scenario_hash="",
        scenario={},
        trials=list(trials),
    )


def test_the_file_is_gzipped_json_in_flent_s_layout() -> None:
    trial = _trial()
    data = flent.render_trial(_run(trial), trial)
    obj = json.loads(gzip.decompress(data))
    assert obj["version"] == 4
    assert set(obj) == {"metadata", "version", "x_values", "results", "raw_values"}
    meta = obj["metadata"]
    assert meta["NAME"] == "rrul" and meta["STEP_SIZE"] == 0.2
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", meta["T0"])
    assert set(obj["results"]) == set(flent.SERIES)
    assert {k: v["UNITS"] for k, v in meta["SERIES_META"].items()} == flent.UNITS
    xs = obj["x_values"]
    assert xs[0] == 0.0 and all(abs(b - a - 0.2) < 1e-9 for a, b in itertools.pairwise(xs))
    assert all(len(v) == len(xs) for v in obj["results"].values())
    # every probe of the three phases, raw, on unix time
    n = sum(len(trial.series[k]) for k in (rrul.SERIES_IDLE, rrul.SERIES_LOADED, rrul.SERIES_AFTER))
    assert len(obj["raw_values"][flent.PING]) == n
    assert flent.render_trial(_run(trial), trial) == data  # the same bytes each time


def test_the_phases_are_placed_end_to_end() -> None:
    trial = _trial()
    line = flent.timeline(trial)
    loaded = trial.series[rrul.SERIES_LOADED]
    up = trial.series[core.THROUGHPUT_DIR.key(direction="up")]
    assert line.load[0] == T0_S
    assert line.load[1] == pytest.approx(T0_S + up[-1][0])
    assert (T0_S, loaded[0][1]) in line.ping_ms
    assert line.up_mbit[0] == pytest.approx((T0_S + up[0][0], up[0][1] / 1e6))
    after_first = (line.load[1], trial.series[rrul.SERIES_AFTER][0][1])
    assert after_first in line.ping_ms


def test_flent_s_interpolation() -> None:
    t0, xs, grid = flent.aggregate({"a": [(10.0, 0.0), (11.0, 10.0)], "b": [(10.0, 5.0), (12.0, 5.0)]})
    assert t0 == 10.0 and len(xs) == 10
    assert grid["a"][:5] == pytest.approx([0.0, 2.0, 4.0, 6.0, 8.0])
    assert grid["a"][5] == 10.0 and grid["a"][6] is None  # its last value once, then nothing
    # the next point is more than five steps (1 s) away until t = 11: Flent leaves those steps empty
    assert grid["b"][:5] == [None] * 5 and grid["b"][5:] == pytest.approx([5.0] * 5)
    # more than five steps between two points: a gap, not a line
    _, _, far = flent.aggregate({"a": [(0.0, 1.0), (2.0, 3.0)]})
    assert far["a"][:5] == [None] * 5 and far["a"][5:] == pytest.approx([2.0, 2.2, 2.4, 2.6, 2.8])


def test_read_back_with_the_load_cut_out_gives_the_trial_s_figures() -> None:
    trial = _trial()
    f = flent.read(flent.render_trial(_run(trial), trial))
    loaded = trial.series[rrul.SERIES_LOADED]
    start = float(f.metadata["TEST_PARAMETERS"]["load_start_s"])
    end = float(f.metadata["TEST_PARAMETERS"]["load_end_s"])
    fig = flent.figures(f, (start - 1e-3, end - 1e-3))
    ping = fig.ping[flent.PING]
    assert ping.n == len(loaded)
    assert ping.median_ms == pytest.approx(trial.metrics[PHASE.key(phase="loaded", q=50)])
    assert ping.p99_ms == pytest.approx(trial.metrics[PHASE.key(phase="loaded", q=99)])
    # the whole file: idle seconds included, as Flent's summary without a cut-off
    whole = flent.figures(f)
    all_ms = [v for _, v in flent.timeline(trial).ping_ms]
    whole_p50, loaded_p50 = whole.ping[flent.PING].median_ms, ping.median_ms
    assert whole_p50 == pytest.approx(percentile(all_ms, 50))
    assert whole_p50 is not None and loaded_p50 is not None and whole_p50 < loaded_p50
    # goodput: iperf3's own figure without a cut-off (MEAN_VALUE), the gridded seconds with one
    up, down = (trial.metrics[core.THROUGHPUT_DIR.key(direction=d)] for d in ("up", "down"))
    assert up is not None and down is not None
    assert whole.upload_mbit == pytest.approx(up / 1e6)
    assert whole.download_mbit == pytest.approx(down / 1e6)
    cut = flent.values(f, flent.UP_SUM, (start, end))
    assert fig.upload_mbit == pytest.approx(sum(cut) / len(cut))


def test_the_load_cut_off() -> None:
    trial = _trial()
    f = flent.read(flent.render_trial(_run(trial), trial))
    start, end = flent.load_cutoff(f)
    assert start == pytest.approx(T0_S - flent.EDGE_S)  # the grid starts at the first idle probe, t = 0
    assert f.total_length + end == pytest.approx(flent.timeline(trial).load[1] - flent.EDGE_S, abs=1e-3)
    fig = flent.figures(f, (start, end))  # the loaded phase's probes, all of them and only them
    assert fig.ping[flent.PING].n == len(trial.series[rrul.SERIES_LOADED])
    # a file of Flent's own: 5 s of idle each side of a 60 s load
    flents = flent.FlentFile({"LENGTH": 60, "TOTAL_LENGTH": 70, "TEST_PARAMETERS": {}}, [0.0], {})
    assert flent.load_cutoff(flents) == (5.0, -5.0)


def test_flent_s_summary_option() -> None:
    """summary = "flent": Flent's idle seconds (5 s each side unless idle_s is given) and its whole-test p50
    and p99, which are what Flent's summary reads from the exported file without a cut-off."""
    assert rrul.RrulOptions().idle_s == rrul.IDLE_S and rrul.RrulOptions().summary == "tunbench"
    assert rrul.RrulOptions.model_validate({"summary": "flent"}).idle_s == rrul.FLENT_IDLE_S
    assert rrul.RrulOptions.model_validate({"summary": "flent", "idle_s": 1}).idle_s == 1.0
    with pytest.raises(ValueError, match="summary"):
        rrul.RrulOptions.model_validate({"summary": "netperf"})
    plain, trial = _trial(), _trial(summary="flent")
    whole = PHASE.key(phase="whole", q=50)
    assert whole not in plain.metrics  # the default stores what it stored before
    f = flent.read(flent.render_trial(_run(trial), trial))
    assert f.metadata["TEST_PARAMETERS"]["summary"] == "flent"
    ping = flent.figures(f).ping[flent.PING]
    assert ping.median_ms == pytest.approx(trial.metrics[whole])
    assert ping.p99_ms == pytest.approx(trial.metrics[PHASE.key(phase="whole", q=99)])
    # the idle seconds pull Flent's median below the loaded one's (the loaded file's RTT is the larger)
    assert trial.metrics[whole] < trial.metrics[PHASE.key(phase="loaded", q=50)]
    wl = rrul.RrulWorkload()
    assert [c.header for c in wl.table_columns([plain])] == [c.header for c in wl.columns]
    headers = [c.header for c in wl.table_columns([plain, trial])]
    assert "Flent p50" in headers and "+p50" not in headers
    assert "Flent's p50" in wl.headline(trial) and "Flent" not in wl.headline(plain)


def test_reading_refuses_what_it_does_not_know(tmp_path: Path) -> None:
    trial = _trial()
    obj = flent.resultset(_run(trial), trial)
    with pytest.raises(ExportError, match="version 5"):
        flent.read(json.dumps({**obj, "version": 5}).encode())
    with pytest.raises(ExportError, match="not a Flent data file"):
        flent.read(gzip.compress(b"{not json"))
    with pytest.raises(ExportError, match="no metadata"):
        flent.read(b'{"x": 1}')
    assert flent.read(json.dumps(obj).encode()).x_values == obj["x_values"]  # uncompressed JSON too


def test_the_exporter_writes_one_rrul_trial_a_file() -> None:
    a, b = _trial(1), _trial(2)
    other = _trial(3, workload="iperf3")
    exporter = flent.FlentExporter()
    chosen = by_suffix(Path("x.flent.gz"))
    assert chosen is not None and chosen.name == "flent"
    assert exporter.render([_run(a, other)]) == flent.render_trial(_run(a, other), a)
    with pytest.raises(ExportError, match="have 2"):
        exporter.render([_run(a, b)])
    names = list(exporter.files([_run(a, b, other)]))
    assert names == [
        "rrul-r1-t1-wireguard-go-wan-50ms-1f-r0.flent.gz",
        "rrul-r1-t2-wireguard-go-wan-50ms-1f-r0.flent.gz",
    ]
    with pytest.raises(ExportError, match="no rrul trial"):
        exporter.files([_run(other)])
    with pytest.raises(ExportError, match="iperf3 trial"):
        flent.timeline(other)


FLENT = os.environ.get("TUNBENCH_FLENT") or shutil.which("flent")


@pytest.mark.skipif(
    FLENT is None,
    reason="flent is not installed (make flent, then TUNBENCH_FLENT=build/flent-venv/bin/flent; make test sets it)",
)
def test_flent_itself_reads_the_file_and_agrees(tmp_path: Path) -> None:
    """Flent's own summary of the file gives the medians and p99s the reader computes."""
    assert FLENT is not None
    trial = _trial()
    path = tmp_path / flent.file_name(_run(trial), trial)
    path.write_bytes(flent.render_trial(_run(trial), trial))
    out = subprocess.run([FLENT, "-i", str(path), "-f", "summary"], capture_output=True, text=True, check=True).stdout
    fig = flent.figures(flent.read(path.read_bytes()))
    row = re.search(r"Ping \(ms\) UDP BE\s*:\s*([\d.]+)\s+([\d.]+)\s+([\d.]+) ms", out)
    assert row, out
    assert float(row.group(2)) == pytest.approx(fig.ping[flent.PING].median_ms, abs=0.006)
    assert float(row.group(3)) == pytest.approx(fig.ping[flent.PING].p99_ms, abs=0.006)
    up = re.search(r"TCP upload sum\s*:\s*([\d.]+)", out)
    assert up and float(up.group(1)) == pytest.approx(fig.upload_mbit, abs=0.006)


def test_export_writes_a_file_per_rrul_trial(tmp_path: Path) -> None:
    """`tunbench export --format flent -o DIR` from a store: one file per rrul trial, as Flent's reader
    reads them; `-o FILE.flent.gz` takes a run of one rrul trial only."""
    from typer.testing import CliRunner

    from tunbench.cli import app
    from tunbench.store.db import Store

    db = tmp_path / "r.db"
    with Store(db) as s:
        rid = s.create_run(
            uid="tbflent1", name="rr", tunbench_version="0", provenance={}, scenario_text="", scenario_hash="",
            scenario={},
        )  # fmt: skip
        for t in (_trial(1), _trial(2), _trial(3, workload="iperf3")):
            s.add_trial(rid, t)
        s.finish_run(rid, "done")
    out = tmp_path / "flent"
    res = CliRunner().invoke(app, ["export", "rr", "--format", "flent", "-o", str(out), "--db", str(db)])
    assert res.exit_code == 0, res.output
    files = sorted(p.name for p in out.iterdir())
    assert files == [
        "rrul-tbflent1-t1-wireguard-go-wan-50ms-1f-r0.flent.gz",
        "rrul-tbflent1-t2-wireguard-go-wan-50ms-1f-r0.flent.gz",
    ]
    f = flent.read((out / files[0]).read_bytes())
    fig = flent.figures(f, flent.load_cutoff(f))
    assert fig.ping[flent.PING].median_ms == pytest.approx(_trial().metrics[PHASE.key(phase="loaded", q=50)])
    one = CliRunner().invoke(app, ["export", "rr", "-f", "flent", "-o", str(tmp_path / "x.flent.gz"), "--db", str(db)])
    assert isinstance(one.exception, ExportError) and "have 2" in str(one.exception)
    bad = CliRunner().invoke(app, ["export", "rr", "-f", "flent", "--db", str(db)])
    assert bad.exit_code == 2 and "-o" in bad.output
