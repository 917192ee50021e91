"""`tunbench compare` logic (report/compare.py) on synthetic runs: verdict signs, gate, matching, inputs."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.unit.report_data import run, samples, trial
from tunbench.cli import app
from tunbench.report.compare import (
    EXIT_REGRESSED,
    CaseComparison,
    CompareError,
    CompareResult,
    compare_lines,
    compare_runs,
    compare_table,
    load_run,
    parse_threshold,
    run_from_export,
)
from tunbench.report.json_export import export
from tunbench.results import RunRecord
from tunbench.store.db import Store


def one_case(
    label: str,
    values: list[float],
    *,
    rid: int,
    uid: str,
    cpu: float | None = 1.0,
    tunnel: str | None = None,
    extra: dict[str, float | None] | None = None,
) -> RunRecord:
    trials = [
        trial(i + 1, label, v, repetition=i + 1, cpu_client_s=cpu, tunnel=tunnel, extra=extra)
        for i, v in enumerate(values)
    ]
    return run(trials, rid=rid, uid=uid)


def rows_by_metric(result: CompareResult) -> dict[str, CaseComparison]:
    return {r.metric.name: r for r in result.rows}


# ---- threshold ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "want"), [("3%", 0.03), ("0.03", 0.03), (" 2.5% ", 0.025), ("0", 0.0)])
def test_parse_threshold_accepts_percent_and_fraction(text: str, want: float) -> None:
    assert parse_threshold(text) == pytest.approx(want)


@pytest.mark.parametrize("text", ["3", "abc", "-1%", "150%", "nan"])
def test_parse_threshold_refuses_ambiguous_or_invalid(text: str) -> None:
    with pytest.raises(CompareError):
        parse_threshold(text)


# ---- verdicts --------------------------------------------------------------------------------------


def test_slower_candidate_regresses_with_negative_change() -> None:
    a = one_case("socat", samples(4e9, 6, 0.02, seed=1), rid=1, uid="tba")
    b = one_case("socat", samples(3e9, 6, 0.02, seed=2), rid=2, uid="tbb")
    res = compare_runs(a, b, threshold=0.03)
    thr = rows_by_metric(res)["throughput_bps"]
    assert thr.result.change == pytest.approx(-0.25, abs=0.05)
    assert thr.result.ci_high < 0
    assert thr.verdict_text == "slower"
    assert res.exit_code == EXIT_REGRESSED
    assert any("regression" in line for line in compare_lines(res))


def test_faster_candidate_is_better_and_exits_zero() -> None:
    a = one_case("socat", samples(3e9, 6, 0.02, seed=1), rid=1, uid="tba")
    b = one_case("socat", samples(4e9, 6, 0.02, seed=2), rid=2, uid="tbb")
    res = compare_runs(a, b, threshold=0.03)
    thr = rows_by_metric(res)["throughput_bps"]
    assert thr.result.change > 0.2
    assert thr.verdict_text == "faster"
    # The same CPU seconds over more bits: cheaper per bit, also not a regression.
    assert rows_by_metric(res)["cpu_s_per_bit.client"].verdict_text == "cheaper"
    assert res.exit_code == 0


def test_same_distribution_gives_no_significant_change() -> None:
    values = samples(4e9, 8, 0.03, seed=3)
    a = one_case("socat", values, rid=1, uid="tba")
    b = one_case("socat", list(reversed(values)), rid=2, uid="tbb")
    res = compare_runs(a, b, threshold=0.03)
    assert {r.result.verdict for r in res.rows} == {"no significant change"}
    assert res.exit_code == 0


def test_change_below_threshold_is_not_a_regression() -> None:
    a = one_case("socat", samples(4.00e9, 8, 0.001, seed=1), rid=1, uid="tba")
    b = one_case("socat", samples(3.92e9, 8, 0.001, seed=2), rid=2, uid="tbb")  # -2 %, very precise
    assert compare_runs(a, b, threshold=0.0).exit_code == EXIT_REGRESSED
    assert compare_runs(a, b, threshold=0.05).exit_code == 0


def test_cpu_per_bit_regression_at_equal_throughput() -> None:
    values = samples(4e9, 6, 0.01, seed=4)
    a = one_case("socat", values, rid=1, uid="tba", cpu=1.0)
    b = one_case("socat", values, rid=2, uid="tbb", cpu=2.0)
    res = compare_runs(a, b, threshold=0.03)
    cpu = rows_by_metric(res)["cpu_s_per_bit.client"]
    assert cpu.result.change == pytest.approx(1.0, rel=0.05)
    assert cpu.verdict_text == "costlier"
    assert res.exit_code == EXIT_REGRESSED
    assert rows_by_metric(res)["throughput_bps"].result.verdict == "no significant change"
    assert "cpu_s_per_bit.server" not in rows_by_metric(res)  # no server process: nothing to compare


def test_metric_kinds_filter_the_gate() -> None:
    values = samples(4e9, 6, 0.01, seed=4)
    a = one_case("socat", values, rid=1, uid="tba", cpu=1.0)
    b = one_case("socat", values, rid=2, uid="tbb", cpu=2.0)
    res = compare_runs(a, b, threshold=0.03, kinds=("throughput",))
    assert list(rows_by_metric(res)) == ["throughput_bps"]
    assert res.exit_code == 0


def test_latency_percentiles_are_lower_is_better_when_present() -> None:
    vals = samples(4e9, 6, 0.01, seed=5)
    a = run([trial(i + 1, "x", v, extra={"latency.p50_ms": 10.0 + 0.1 * i}) for i, v in enumerate(vals)], uid="tba")
    b = run([trial(i + 1, "x", v, extra={"latency.p50_ms": 20.0 + 0.1 * i}) for i, v in enumerate(vals)], uid="tbb")
    res = compare_runs(a, b, threshold=0.03)
    lat = rows_by_metric(res)["latency.p50_ms"]
    assert lat.result.change > 0.9
    assert lat.result.regressed
    assert lat.verdict_text == "slower"


def test_no_latency_rows_without_latency_metrics() -> None:
    a = one_case("x", samples(4e9, 5, 0.01, seed=1), rid=1, uid="tba")
    b = one_case("x", samples(4e9, 5, 0.01, seed=2), rid=2, uid="tbb")
    assert not [r for r in compare_runs(a, b).rows if r.metric.kind == "latency"]


def test_three_repetitions_cannot_reach_significance_and_say_so() -> None:
    a = one_case("socat", [4e9, 4.01e9, 3.99e9], rid=1, uid="tba")
    b = one_case("socat", [2e9, 2.01e9, 1.99e9], rid=2, uid="tbb")
    res = compare_runs(a, b, threshold=0.03)
    assert rows_by_metric(res)["throughput_bps"].result.verdict == "no significant change"
    assert res.exit_code == 0
    assert any(w.code == "cannot-reach-significance" for w in res.warnings())
    assert math.isinf(rows_by_metric(res)["throughput_bps"].result.min_detectable_effect)


def test_very_noisy_cpu_with_small_threshold_does_not_crash() -> None:
    # stats.required_repetitions overflows for n > ~500; compare_runs must still give a verdict.
    a = one_case("socat", samples(4e9, 5, 0.01, seed=1), rid=1, uid="tba")
    b = one_case("socat", samples(4e9, 5, 0.01, seed=2), rid=2, uid="tbb")
    for i, t in enumerate(b.trials):
        t.metrics["cpu.client.sys_s"] = [0.2, 2.0, 0.4, 1.5, 0.1][i]
    res = compare_runs(a, b, threshold=0.01)
    cpu = rows_by_metric(res)["cpu_s_per_bit.client"]
    assert cpu.result.threshold == 0.01
    assert any(w.code == "underpowered" for w in cpu.result.warnings)


# ---- matching ------------------------------------------------------------------------------------------


def test_labels_within_one_run() -> None:
    old = [trial(i + 1, "old", v, tunnel="socat", repetition=i + 1) for i, v in enumerate(samples(4e9, 5, 0.01, 1))]
    new = [trial(i + 9, "new", v, tunnel="socat", repetition=i + 1) for i, v in enumerate(samples(3e9, 5, 0.01, 2))]
    r = run(old + new)
    res = compare_runs(r, r, label_a="old", label_b="new", threshold=0.03)
    thr = rows_by_metric(res)["throughput_bps"]
    assert thr.result.change < -0.2
    assert "old → new" in thr.case_label
    assert res.exit_code == EXIT_REGRESSED


def test_same_run_without_labels_is_an_error() -> None:
    r = one_case("x", [1.0, 2.0, 3.0], rid=1, uid="tba")
    with pytest.raises(CompareError, match="same run"):
        compare_runs(r, r)


def test_unknown_label_names_the_labels_there() -> None:
    r = one_case("x", [1.0, 2.0, 3.0], rid=1, uid="tba")
    with pytest.raises(CompareError, match="labels there: x"):
        compare_runs(r, r, label_a="x", label_b="nope")


def test_differently_labelled_runs_need_label_options() -> None:
    a = one_case("socat", [1.0, 2.0, 3.0], rid=1, uid="tba")
    b = one_case("slow", [1.0, 2.0, 3.0], rid=2, uid="tbb", tunnel="socat")
    with pytest.raises(CompareError, match="--label-a"):
        compare_runs(a, b)
    assert compare_runs(a, b, label_a="socat", label_b="slow").rows


def test_direct_changes_are_shown_but_do_not_gate() -> None:
    a = one_case("direct", samples(17e9, 6, 0.01, seed=1), rid=1, uid="tba", cpu=None)
    b = one_case("direct", samples(12e9, 6, 0.01, seed=2), rid=2, uid="tbb", cpu=None)
    res = compare_runs(a, b, threshold=0.03)
    assert res.rows[0].result.regressed
    assert res.exit_code == 0
    assert any("direct baseline changed" in n for n in res.notes)


def test_unmatched_cases_are_listed() -> None:
    a = run([trial(1, "socat", 4e9), trial(2, "socat", 4e9, flows=2)], rid=1, uid="tba")
    b = run([trial(1, "socat", 4e9)], rid=2, uid="tbb")
    res = compare_runs(a, b)
    assert len(res.unmatched_a) == 1 and res.unmatched_a[0].flows == 2
    assert any("only in A" in line for line in compare_lines(res))


def test_table_has_one_row_per_case_and_metric() -> None:
    a = one_case("socat", samples(4e9, 6, 0.02, seed=1), rid=1, uid="tba")
    b = one_case("socat", samples(3e9, 6, 0.02, seed=2), rid=2, uid="tbb")
    table = compare_table(compare_runs(a, b))
    assert table.row_count == 2  # throughput + client CPU per bit
    assert [c.header for c in table.columns][:2] == ["case", "metric"]


# ---- inputs: JSON exports and the store ------------------------------------------------------------------


def test_json_export_round_trip_gives_the_same_verdicts(tmp_path: Path) -> None:
    a = one_case("socat", samples(4e9, 6, 0.02, seed=1), rid=1, uid="tba")
    b = one_case("socat", samples(3e9, 6, 0.02, seed=2), rid=2, uid="tbb")
    path = tmp_path / "a.json"
    path.write_text(json.dumps(export(a)))
    a2 = load_run(str(path), tmp_path / "none.db")
    assert [t.metrics for t in a2.trials] == [t.metrics for t in a.trials]
    assert [t.streams for t in a2.trials] == [t.streams for t in a.trials]
    r1, r2 = compare_runs(a, b), compare_runs(a2, b)
    assert [(r.metric.name, r.result.change, r.result.verdict) for r in r1.rows] == [
        (r.metric.name, r.result.change, r.result.verdict) for r in r2.rows
    ]


def test_bad_json_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CompareError, match="schema"):
        run_from_export({"schema": 99, "run": {}, "trials": []})
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CompareError, match="cannot read"):
        load_run(str(bad), tmp_path / "x.db")


def _store_with(path: Path, r: RunRecord, name: str) -> None:
    with Store(path) as store:
        rid = store.create_run(
            uid=r.uid,
            name=name,
            tunbench_version="0.1.0",
            provenance=r.provenance,
            scenario_text="",
            scenario_hash="",
            scenario={},
        )
        for t in r.trials:
            store.add_trial(rid, t)
        store.finish_run(rid, "done")


def test_load_run_from_store_and_missing_run(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _store_with(db, one_case("socat", [4e9, 4.1e9, 3.9e9], rid=0, uid="tbaaaaaa"), "first")
    assert load_run("first", db).uid == "tbaaaaaa"
    assert load_run("1", db).name == "first"
    with pytest.raises(CompareError, match="no run"):
        load_run("nope", db)
    with pytest.raises(CompareError, match="no result store"):
        load_run("1", tmp_path / "missing.db")


# ---- CLI ---------------------------------------------------------------------------------------------


@pytest.fixture()
def ab_store(tmp_path: Path) -> Path:
    db = tmp_path / "ab.db"
    _store_with(db, one_case("socat", samples(4e9, 6, 0.02, seed=1), rid=0, uid="tbaaaaaa"), "fast")
    _store_with(db, one_case("socat", samples(3e9, 6, 0.02, seed=2), rid=0, uid="tbbbbbbb"), "slow")
    _store_with(db, one_case("socat", samples(4e9, 6, 0.02, seed=3), rid=0, uid="tbcccccc"), "fast2")
    return db


def test_cli_compare_exit_codes(ab_store: Path) -> None:
    runner = CliRunner()
    slow = runner.invoke(app, ["compare", "fast", "slow", "--db", str(ab_store), "--threshold", "3%"])
    assert slow.exit_code == EXIT_REGRESSED, slow.output
    assert "regression(s) beyond the threshold" in slow.output
    same = runner.invoke(app, ["compare", "fast", "fast2", "--db", str(ab_store), "--threshold", "3%"])
    assert same.exit_code == 0, same.output
    assert "no regression" in same.output


def test_cli_errors_exit_2_with_one_line(ab_store: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from tunbench.cli import main; main()",
            "compare",
            "fast",
            "nope",
            "--db",
            str(ab_store),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("Error: ") and "Traceback" not in proc.stderr


def test_labels_with_brackets_are_printed_verbatim() -> None:
    from rich.console import Console

    old = [trial(i + 1, "socat[buffer=512]", v, tunnel="socat") for i, v in enumerate(samples(4e9, 5, 0.01, 1))]
    new = [trial(i + 9, "socat[buffer=64]", v, tunnel="socat") for i, v in enumerate(samples(3e9, 5, 0.01, 2))]
    r = run(old + new)
    res = compare_runs(r, r, label_a="socat[buffer=512]", label_b="socat[buffer=64]")
    console = Console(width=250, record=True)
    console.print(compare_table(res))
    for line in compare_lines(res):
        console.print(line)
    text = console.export_text()
    assert "socat[buffer=512] → socat[buffer=64]" in text
