"""A data file of Flent's own read for comparison (report/flent_compare.py, `tunbench import-flent`).

tests/data/flent/rrul-flent20-l10.flent.gz is a real Flent 2.3.0 rrul run (`flent rrul -l 10`, netperf,
irtt and ping) between two tunbench namespaces over a 20 Mbit/s, 10 ms each way emulated link (`tunbench
link shell --profile 'flent20:delay=10ms,rate=20mbit'`, docs/flent.md). The expected figures are what
`flent -i FILE -f summary` printed for it, without and with `--data-cutoff 5,-5`."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunbench.cli import app
from tunbench.errors import ExportError
from tunbench.metrics.latency import PHASE
from tunbench.report import flent_compare as fc
from tunbench.report.exporters import flent
from tunbench.store.db import Store

from .test_flent_format import _trial

FILE = Path(__file__).parent.parent / "data" / "flent" / "rrul-flent20-l10.flent.gz"


def _file() -> flent.FlentFile:
    return flent.read(FILE.read_bytes(), str(FILE))


def test_flent_s_own_file_gives_flent_s_summary() -> None:
    f = _file()
    assert f.metadata["LENGTH"] == 10 and f.metadata["TOTAL_LENGTH"] == 20
    assert flent.load_cutoff(f) == (5.0, -5.0)  # its DELAY, each end
    # `flent -f summary`: every second, idle included
    whole = fc.row(f, "f", "flent")
    assert (whole.ping_p50_ms, whole.ping_p99_ms, whole.n) == (
        pytest.approx(85.98, abs=0.005),
        pytest.approx(169.03, abs=0.005),
        99,
    )
    assert whole.up_mbit == pytest.approx(9.68, abs=0.005) and whole.down_mbit == pytest.approx(18.92, abs=0.005)
    # `flent -f summary --data-cutoff 5,-5`: the load only
    load = fc.row(f, "f", "tunbench")
    assert (load.ping_p50_ms, load.ping_p99_ms, load.n) == (
        pytest.approx(107.64, abs=0.005),
        pytest.approx(169.24, abs=0.005),
        50,
    )
    assert load.up_mbit == pytest.approx(10.11, abs=0.005) and load.down_mbit == pytest.approx(18.92, abs=0.005)
    icmp = fc.row(f, "f", "tunbench", "Ping (ms) ICMP")
    assert icmp.ping_p50_ms == pytest.approx(106.00, abs=0.005) and icmp.n == 50
    with pytest.raises(ExportError, match="no series 'Ping \\(ms\\) UDP CS7'.*ICMP"):
        fc.row(f, "f", "tunbench", "Ping (ms) UDP CS7")


def test_medians_and_ratios() -> None:
    a = fc.Row("a", "", 10.0, 20.0, 5, 1.0, None)
    b = fc.Row("b", "", 30.0, 40.0, 5, 3.0, None)
    med = fc.median_row([a, b], "m")
    assert med.values() == (20.0, 30.0, 2.0, None) and med.n == 2
    assert fc.ratios(med, a) == (2.0, 1.5, 2.0, None)
    assert fc.ratio(1.0, 0.0) is None


def test_a_run_s_rrul_trials_by_the_same_reader() -> None:
    trial = _trial(summary="flent")
    from .test_flent_format import _run

    whole = fc.run_rows(_run(trial), "flent")
    assert len(whole) == 1 and whole[0].source == "r1 #1" and whole[0].title == "wireguard-go wan-50ms 1f rep 0"
    assert whole[0].ping_p50_ms == pytest.approx(trial.metrics[PHASE.key(phase="whole", q=50)])
    load = fc.run_rows(_run(trial), "tunbench")
    assert load[0].ping_p50_ms == pytest.approx(trial.metrics[PHASE.key(phase="loaded", q=50)])
    with pytest.raises(ExportError, match="no rrul trial"):
        fc.run_rows(_run(_trial(workload="iperf3")), "flent")


def test_import_flent_prints_both_sides_and_their_ratio(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with Store(db) as s:
        rid = s.create_run(
            uid="tbflent2", name="rr", tunbench_version="0", provenance={}, scenario_text="", scenario_hash="",
            scenario={},
        )  # fmt: skip
        for seq in (1, 2):
            s.add_trial(rid, _trial(seq, summary="flent"))
        s.finish_run(rid, "done")
    args = ["import-flent", str(FILE), "--run", "rr", "--db", str(db), "--windows", "flent"]
    res = CliRunner().invoke(app, args, terminal_width=200)
    assert res.exit_code == 0, res.output
    out = res.output
    assert "rrul-flent20-l10.flent.gz" in out and "85.98" in out and "rr #1" in out and "rr #2" in out
    p50 = _trial(summary="flent").metrics[PHASE.key(phase="whole", q=50)]
    assert p50 is not None
    ratio_line = next(line for line in out.splitlines() if "ratio tunbench / Flent" in line)
    assert f"{p50 / 85.98:.3f}" in ratio_line
    bad = CliRunner().invoke(app, ["import-flent", str(FILE), "--windows", "both"])
    assert bad.exit_code == 2 and "--windows" in bad.output
    missing = CliRunner().invoke(app, ["import-flent", str(tmp_path / "none.flent.gz")])
    assert isinstance(missing.exception, ExportError) and "cannot read" in str(missing.exception)


def test_a_written_file_has_the_layout_of_flent_s_own() -> None:
    """What tunbench writes is a subset of the real file's layout: its top-level keys, the metadata keys
    Flent's own has (their types), and its series, under the same names and units."""
    from .test_flent_format import _run

    theirs = json.loads(gzip.decompress(FILE.read_bytes()))
    trial = _trial(summary="flent")
    ours = json.loads(gzip.decompress(flent.render_trial(_run(trial), trial)))
    assert set(ours) == set(theirs) and ours["version"] == theirs["version"]
    common = set(ours["metadata"]) & set(theirs["metadata"])
    assert set(ours["metadata"]) - common == set()  # no key Flent's file lacks
    for key in common - {"NOTE"}:  # Flent writes null for a run without -n NOTE
        assert isinstance(ours["metadata"][key], type(theirs["metadata"][key]) | float), key
    assert set(ours["results"]) <= set(theirs["results"])
    for name in ours["results"]:
        assert ours["metadata"]["SERIES_META"][name]["UNITS"] == theirs["metadata"]["SERIES_META"][name]["UNITS"]
    assert set(ours["raw_values"]) <= set(theirs["raw_values"])
    raw_keys = set(theirs["raw_values"][flent.PING][0])
    assert set(ours["raw_values"][flent.PING][0]) <= raw_keys
