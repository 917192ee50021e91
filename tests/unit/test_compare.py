"""`tunbench compare` logic (report/compare/) on synthetic runs: verdict signs, gate, matching, inputs."""

from __future__ import annotations

import io
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.unit.report_data import run, samples, trial
from tunbench.cli import app
from tunbench.report.compare import (
    EXIT_REGRESSED,
    CaseComparison,
    CompareError,
    CompareResult,
    Gate,
    compare_lines,
    compare_runs,
    compare_table,
    load_run,
    pair_trials,
    pair_values,
    run_from_export,
)
from tunbench.report.exporters.json import export
from tunbench.results import RunRecord, TrialRecord
from tunbench.store.db import Store
from tunbench.units import parse_fraction


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
def test_parse_fraction_accepts_percent_and_fraction(text: str, want: float) -> None:
    assert parse_fraction(text, "--threshold") == pytest.approx(want)


@pytest.mark.parametrize("text", ["3", "abc", "-1%", "150%", "nan"])
def test_parse_fraction_refuses_ambiguous_or_invalid(text: str) -> None:
    with pytest.raises(ValueError, match=r"^--threshold "):
        parse_fraction(text, "--threshold")


@pytest.mark.parametrize("text", ["3", "abc", "-1%", "150%", "nan"])
def test_parse_fraction_names_the_flag_it_parses(text: str) -> None:
    from tunbench.units import parse_fraction

    assert parse_fraction(" 2.5% ", "--redo-steal") == pytest.approx(0.025)
    with pytest.raises(ValueError, match=f"^--redo-steal {text!r}: "):
        parse_fraction(text, "--redo-steal")


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
    within = compare_runs(a, b, threshold=0.05)
    assert within.exit_code == 0
    # significant (p far below alpha), but smaller than the threshold: named, not called "no change"
    thr = rows_by_metric(within)["throughput_bps"]
    assert thr.result.verdict == "no significant change" and thr.result.within_threshold
    assert thr.wide and thr.verdict_text == "slower, within 10.0%"  # the wide tier: twice the threshold
    same = one_case("socat", samples(4.00e9, 8, 0.001, seed=3), rid=3, uid="tbc")
    assert not rows_by_metric(compare_runs(a, same, threshold=0.05))["throughput_bps"].result.within_threshold


def test_caption_counts_each_tiers_family() -> None:
    a = one_case("socat", samples(4e9, 10, 0.01, seed=1), rid=1, uid="tba", cpu=1.0)
    b = one_case("socat", samples(4e9, 10, 0.01, seed=2), rid=2, uid="tbb", cpu=1.0)
    res = compare_runs(a, b, threshold=0.03)
    # main: the tunnel's CPU per bit alone; wide: throughput and the client's CPU per bit (no server process)
    assert {r.metric.name: r.wide for r in res.rows} == {
        "throughput_bps": True, "cpu_s_per_bit": False, "cpu_s_per_bit.client": True,
    }  # fmt: skip
    main, wide = 1, 2
    assert res.family_sizes() == (main, wide)
    out = io.StringIO()
    from rich.console import Console

    Console(file=out, width=400).print(compare_table(res))
    text = " ".join(out.getvalue().split())
    said = f"adjusted over the {main} gated comparison(s) of the main tier, or the {wide} of the wide tier"
    assert said in text
    from tunbench.report.html.compare import render_comparison

    assert said in render_comparison(res, None)  # the HTML page's caption: the same words


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
    assert any(f.warning.code == "cannot-reach-significance" for f in res.warnings())
    assert math.isinf(rows_by_metric(res)["throughput_bps"].result.min_detectable_effect)


def test_very_noisy_cpu_with_small_threshold_does_not_crash() -> None:
    # stats.required_repetitions overflows for n > ~500; compare_runs must still give a verdict.
    a = one_case("socat", samples(4e9, 5, 0.01, seed=1), rid=1, uid="tba")
    b = one_case("socat", samples(4e9, 5, 0.01, seed=2), rid=2, uid="tbb")
    for i, t in enumerate(b.trials):
        t.metrics["cpu.client.sys_s"] = [0.2, 2.0, 0.4, 1.5, 0.1][i]
    res = compare_runs(a, b, threshold=0.01)
    cpu = rows_by_metric(res)["cpu_s_per_bit"]  # the tunnel's, both sides: the cost gate's main tier
    assert cpu.result.threshold == 0.01
    assert any(w.code == "underpowered" for w in cpu.result.warnings)


# ---- matching ------------------------------------------------------------------------------------------


def test_labels_within_one_run() -> None:
    # 6 repetitions: one run, two labels, paired by repetition (5 pairs could not reach p < 0.05: 2/2**5)
    old = [trial(i + 1, "old", v, tunnel="socat", repetition=i + 1) for i, v in enumerate(samples(4e9, 6, 0.01, 1))]
    new = [trial(i + 9, "new", v, tunnel="socat", repetition=i + 1) for i, v in enumerate(samples(3e9, 6, 0.01, 2))]
    r = run(old + new)
    res = compare_runs(r, r, label_a="old", label_b="new", threshold=0.03)
    thr = rows_by_metric(res)["throughput_bps"]
    assert thr.result.change < -0.2
    assert thr.result.analysis == "paired" and thr.result.n_pairs == 6
    assert "old → new" in thr.case_label
    assert res.exit_code == EXIT_REGRESSED
    # a paired verdict on unplaced pairs carries a caution; placed pairs do not (docs/precision.md)
    assert any("without CPU placement" in n for n in res.notes), res.notes
    for t in r.trials:
        t.params["cpuset"] = {"client": "0", "server": "1"}
    placed = compare_runs(r, r, label_a="old", label_b="new", threshold=0.03)
    assert placed.exit_code == EXIT_REGRESSED and not any("without CPU placement" in n for n in placed.notes)


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
    assert table.row_count == 3  # throughput, the tunnel's CPU per bit, its client side's
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
    from tunbench.errors import ExportError

    with pytest.raises(ExportError, match="schema") as e:
        run_from_export({"schema": 99, "run": {}, "trials": []})
    assert e.value.exit_code == 2
    other = tmp_path / "other.json"
    other.write_text('{"schema": 99}')
    with pytest.raises(CompareError, match="schema"):  # compare's own error once it reads the file
        load_run(str(other), tmp_path / "x.db")
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
    # the store itself given as A (`tunbench compare results/demo.db`): said so, with the line to type
    with pytest.raises(CompareError, match=rf"{re.escape(str(db))} is a result store, not a run: .* --db "):
        load_run(str(db), tmp_path / "other.db")
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


# ---- signed and near-zero metrics: absolute comparisons ------------------------------------------------


def _latency_run(increase_ms: list[float], *, uid: str, rid: int) -> RunRecord:
    vals = samples(4e9, len(increase_ms), 0.01, seed=rid)
    trials = [
        trial(i + 1, "x", v, repetition=i + 1, extra={"latency.increase_p50_ms": inc})
        for i, (v, inc) in enumerate(zip(vals, increase_ms, strict=True))
    ]
    return run(trials, rid=rid, uid=uid)


def test_latency_increase_from_minus_2_to_plus_5_ms_is_worse_in_ms() -> None:
    # Relative to -2 ms, +5 ms would be "-350%", i.e. "better"; it is 7 ms more latency under load.
    a = _latency_run([-2.1, -1.9, -2.0, -2.2, -1.8, -2.05], uid="tba", rid=1)
    b = _latency_run([5.1, 4.9, 5.0, 5.2, 4.8, 5.05], uid="tbb", rid=2)
    res = compare_runs(a, b, kinds=("latency",))
    lat = rows_by_metric(res)["latency.increase_p50_ms"]
    assert lat.metric.absolute and lat.result.absolute
    assert lat.result.change == pytest.approx(7.0, abs=0.1)
    assert lat.result.ci_low > 6.5 and lat.result.ci_high < 7.5
    assert lat.result.verdict == "worse" and lat.verdict_text == "slower"
    assert res.exit_code == EXIT_REGRESSED
    text = _render(res)
    row = text.split("latency increase_p50")[1].split("\n")[0]
    assert re.search(r"\+7\.\d ms", row) and "%" not in row  # "+7.1 ms", not "-350%"
    assert re.search(r"\[\+[67]\.\d, \+7\.\d\] 95\.9%", text)  # the CI in ms and its coverage


def test_near_zero_baseline_gives_no_huge_percentage() -> None:
    # A latency increase of 0 +- 0.05 ms on both sides: the same thing, measured twice.
    rng = np.random.default_rng(7)
    a = _latency_run(list(rng.normal(0.0, 0.05, 8)), uid="tba", rid=1)
    b = _latency_run(list(rng.normal(0.0, 0.05, 8)), uid="tbb", rid=2)
    lat = rows_by_metric(compare_runs(a, b, kinds=("latency",)))["latency.increase_p50_ms"]
    assert lat.result.absolute
    assert abs(lat.result.change) < 0.1  # ms, not hundreds of percent
    assert lat.result.ci_low < 0.0 < lat.result.ci_high
    assert lat.result.verdict == "no significant change"


def test_metric_with_a_value_at_or_below_zero_falls_back_to_absolute() -> None:
    # latency.p50_ms is relative in the catalogue, but a baseline median <= 0 never gets a ratio.
    a = run([trial(i + 1, "x", 4e9, extra={"latency.p50_ms": [-0.2, 0.0, -0.1, 0.1, -0.3][i]}) for i in range(5)])
    b = run(
        [trial(i + 1, "x", 4e9, extra={"latency.p50_ms": [3.0, 3.1, 2.9, 3.2, 3.05][i]}) for i in range(5)], uid="tbb"
    )
    lat = rows_by_metric(compare_runs(a, b, kinds=("latency",)))["latency.p50_ms"]
    assert not lat.metric.absolute and lat.result.absolute
    assert lat.result.change == pytest.approx(3.15)
    assert lat.result.verdict == "worse"


def test_absolute_metrics_take_the_threshold_in_ms_not_the_relative_one() -> None:
    a = _latency_run([1.0, 1.02, 0.98, 1.01, 0.99, 1.0], uid="tba", rid=1)
    b = _latency_run([1.5, 1.52, 1.48, 1.51, 1.49, 1.5], uid="tbb", rid=2)  # +0.5 ms
    # a relative threshold of 90 % does not apply to a difference in ms
    assert compare_runs(a, b, kinds=("latency",), threshold=0.9).exit_code == EXIT_REGRESSED
    assert compare_runs(a, b, kinds=("latency",), threshold_abs={"ms": 0.4}).exit_code == EXIT_REGRESSED
    calm = compare_runs(a, b, kinds=("latency",), threshold_abs={"ms": 1.0})
    assert calm.exit_code == 0
    assert rows_by_metric(calm)["latency.increase_p50_ms"].result.threshold == 1.0


def _render(res: CompareResult) -> str:
    from rich.console import Console

    console = Console(width=250, record=True)
    console.print(compare_table(res))
    for line in compare_lines(res):
        console.print(line)
    return console.export_text()


# ---- intervals print their real coverage ------------------------------------------------------------


def test_change_interval_prints_its_real_coverage_not_95() -> None:
    a = one_case("socat", [4.0e9, 4.1e9, 3.9e9], rid=1, uid="tba")
    b = one_case("socat", [3.0e9, 3.1e9, 2.9e9], rid=2, uid="tbb")
    res = compare_runs(a, b)
    assert rows_by_metric(res)["throughput_bps"].result.ci_coverage == pytest.approx(0.9)
    text = _render(res)
    assert "] 90%" in text  # 3 vs 3 cannot give more than 90 %
    assert "95%" not in text


# ---- multiple comparisons ---------------------------------------------------------------------------


def test_holm_keeps_a_lone_p_of_0_03_from_failing_a_gate_of_three_comparisons() -> None:
    # 5 vs 5 with two crossed pairs: exact p = 2 * 4/252 = 0.032 for throughput and for CPU per bit
    # (same CPU seconds, so CPU per bit mirrors throughput; the tunnel's is its client side's here).
    # Unadjusted all would be "worse"; Holm over the 3 gated comparisons (--gate all) gives 0.095: no regression.
    a = one_case("socat", [10e9, 11e9, 12e9, 13e9, 14e9], rid=1, uid="tba")
    b = one_case("socat", [5e9, 6e9, 7e9, 8e9, 11.5e9], rid=2, uid="tbb")
    res = compare_runs(a, b, gate=Gate("all"))
    rows = rows_by_metric(res)
    assert set(rows) == {"throughput_bps", "cpu_s_per_bit", "cpu_s_per_bit.client"}
    for r in rows.values():
        assert r.result.p_value == pytest.approx(8 / 252)
        assert r.result.p_adjusted == pytest.approx(24 / 252)
        assert r.result.family_size == 3
        assert r.result.verdict == "no significant change"
    assert res.exit_code == 0
    assert "p Holm" in [c.header for c in compare_table(res).columns]
    assert "0.095" in _render(res)


def test_holm_leaves_clear_regressions_standing() -> None:
    a = one_case("socat", samples(4e9, 6, 0.02, seed=1), rid=1, uid="tba")
    b = one_case("socat", samples(3e9, 6, 0.02, seed=2), rid=2, uid="tbb")
    res = compare_runs(a, b)
    assert all(r.result.p_adjusted >= r.result.p_value for r in res.rows)
    assert res.exit_code == EXIT_REGRESSED


def test_gate_family_too_large_for_the_repetitions_says_so() -> None:
    # 4 vs 4: the rank test's floor is 0.029, above 0.05 / 2: Holm can never reject anything.
    a = one_case("socat", [4.0e9, 4.1e9, 3.9e9, 4.05e9], rid=1, uid="tba")
    b = one_case("socat", [2.0e9, 2.1e9, 1.9e9, 2.05e9], rid=2, uid="tbb")
    res = compare_runs(a, b, gate=Gate("all"))
    assert res.exit_code == 0
    assert any("Holm-adjusted" in n and "--repeat" in n for n in res.notes)


# ---- network settings --------------------------------------------------------------------------------


def _net(cc: str, mtu: int, uid: str, slot: str = "") -> dict[str, object]:
    side = {
        "congestion_control": cc,
        "tcp_rmem": "4096 131072 6291456",
        "interfaces": {f"{uid}-vc{slot}": {"mtu": mtu, "gso": True}, "lo": {"mtu": 65536}},
    }
    return {"kernel": "6.1.0-18-amd64", "client": side, "server": {**side, "congestion_control": "cubic"}}


def _with_net(r: RunRecord, net: dict[str, object] | None) -> RunRecord:
    for t in r.trials:
        if net is not None:
            t.params["net"] = net
    return r


def test_settings_that_differ_are_named_with_both_values() -> None:
    a = _with_net(one_case("socat", samples(4e9, 5, 0.01, 1), rid=1, uid="tbaaaaaa"), _net("bbr", 1500, "tbaaaaaa"))
    b = _with_net(one_case("socat", samples(4e9, 5, 0.01, 2), rid=2, uid="tbbbbbbb"), _net("cubic", 9000, "tbbbbbbb"))
    res = compare_runs(a, b)
    assert list(res.settings) == [
        "settings differ: client.congestion_control: bbr (A) vs cubic (B)",
        "settings differ: client.interfaces.<run>-vc.mtu: 1500 (A) vs 9000 (B)",
        "settings differ: server.interfaces.<run>-vc.mtu: 1500 (A) vs 9000 (B)",
    ]
    text = _render(res)
    assert "warning: settings differ: client.congestion_control: bbr (A) vs cubic (B)" in text


def test_identical_settings_give_no_warning() -> None:
    a = _with_net(one_case("socat", samples(4e9, 5, 0.01, 1), rid=1, uid="tbaaaaaa"), _net("bbr", 1500, "tbaaaaaa"))
    b = _with_net(one_case("socat", samples(4e9, 5, 0.01, 2), rid=2, uid="tbbbbbbb"), _net("bbr", 1500, "tbbbbbbb"))
    assert compare_runs(a, b).settings == ()


def test_settings_not_recorded_are_reported_once() -> None:
    a = one_case("socat", samples(4e9, 5, 0.01, 1), rid=1, uid="tbaaaaaa")  # an older run: no params["net"]
    b = _with_net(one_case("socat", samples(4e9, 5, 0.01, 2), rid=2, uid="tbbbbbbb"), _net("bbr", 1500, "tbbbbbbb"))
    res = compare_runs(a, b)
    assert len(res.settings) == 1 and "not recorded" in res.settings[0] and "of A" in res.settings[0]
    assert sum("not recorded" in line for line in compare_lines(res)) == 1


def test_settings_compared_within_one_run_by_label() -> None:
    old = [trial(i + 1, "old", v, tunnel="socat") for i, v in enumerate(samples(4e9, 5, 0.01, 1))]
    new = [trial(i + 9, "new", v, tunnel="socat") for i, v in enumerate(samples(4e9, 5, 0.01, 2))]
    for t in old:
        t.params["net"] = _net("bbr", 1500, "tb000001")
    for t in new:
        t.params["net"] = _net("reno", 1500, "tb000001")
    r = run(old + new)
    assert compare_runs(r, r, label_a="old", label_b="new").settings == (
        "settings differ: client.congestion_control: bbr (A) vs reno (B)",
    )


def _hosts(kernel: str, mtu: int) -> dict[str, object]:
    """A --hosts run's provenance of its hosts, as remote/facts.py records them (trimmed)."""
    nic = {"address": "192.0.2.1", "device": "eth0", "mtu": mtu, "driver": "virtio_net", "offloads": {"gso": "on"}}
    return {
        "h1": {"role": "client", "address": "192.0.2.1", "host": {"kernel": kernel}, "cpu": {}, "nic": nic},
        "h2": {"role": "server", "address": "192.0.2.2", "host": {"kernel": "6.1.0-18-amd64"}, "cpu": {}, "nic": nic},
    }


def _on_hosts(r: RunRecord, hosts: dict[str, object]) -> RunRecord:
    r.provenance["hosts"] = hosts
    for t in r.trials:
        t.params["net"] = {}  # the hosts' own namespaces: nothing tunbench made there
    return r


def test_runs_on_hosts_compare_what_they_recorded_of_the_hosts() -> None:
    a = _on_hosts(one_case("socat", samples(4e9, 5, 0.01, 1), rid=1, uid="tbaaaaaa"), _hosts("6.1.0-18-amd64", 1500))
    b = _on_hosts(one_case("socat", samples(4e9, 5, 0.01, 2), rid=2, uid="tbbbbbbb"), _hosts("6.12.9-amd64", 9000))
    res = compare_runs(a, b)
    assert not any("not recorded for" in line for line in res.settings)  # the false warning
    assert res.settings[0].startswith("network settings of A and B (--hosts): each host's kernel and the NIC")
    assert list(res.settings[1:]) == [
        "settings differ: client.nic.mtu: 1500 (A) vs 9000 (B)",
        "settings differ: kernel: 6.1.0-18-amd64 (A) vs 6.12.9-amd64, 6.1.0-18-amd64 (B)",
        "settings differ: server.nic.mtu: 1500 (A) vs 9000 (B)",
    ]
    same = _on_hosts(one_case("socat", samples(4e9, 5, 0.01, 3), rid=3, uid="tbcccccc"), _hosts("6.1.0-18-amd64", 1500))
    assert len(compare_runs(a, same).settings) == 1  # what is known, and nothing differs


def test_a_run_here_against_one_on_hosts_compares_what_both_recorded() -> None:
    a = _with_net(one_case("socat", samples(4e9, 5, 0.01, 1), rid=1, uid="tbaaaaaa"), _net("bbr", 1500, "tbaaaaaa"))
    b = _on_hosts(one_case("socat", samples(4e9, 5, 0.01, 2), rid=2, uid="tbbbbbbb"), _hosts("6.12.9-amd64", 1500))
    res = compare_runs(a, b)
    assert res.settings[0].startswith("network settings of B (--hosts)")
    assert list(res.settings[1:]) == ["settings differ: kernel: 6.1.0-18-amd64 (A) vs 6.12.9-amd64, 6.1.0-18-amd64 (B)"]


# ---- piped output keeps every column --------------------------------------------------------------------


def test_piped_compare_output_keeps_the_verdict_and_mde_columns(tmp_path: Path) -> None:
    db = tmp_path / "pipe.db"
    label = "socat[buffer=65536,label=a-long-build-name]"
    _store_with(db, one_case(label, samples(4e9, 6, 0.02, seed=1), rid=0, uid="tbaaaaaa", tunnel="socat"), "a")
    _store_with(db, one_case(label, samples(3e9, 6, 0.02, seed=2), rid=0, uid="tbbbbbbb", tunnel="socat"), "b")
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE")}
    proc = subprocess.run(
        [sys.executable, "-c", "from tunbench.cli import main; main()", "compare", "a", "b", "--db", str(db)],
        capture_output=True,  # stdout is a pipe, as in CI logs or `| tee`
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == EXIT_REGRESSED, proc.stderr
    header = next(line for line in proc.stdout.splitlines() if "case" in line and "metric" in line)
    for col in ("case", "metric", "n A/B", "change [CI] coverage", "p Holm", "verdict", "MDE"):
        assert col in header, header
    assert "slower" in proc.stdout and "costlier" in proc.stdout
    assert label in proc.stdout  # the case name, not folded over lines


def test_cli_threshold_ms_applies_to_absolute_metrics(tmp_path: Path) -> None:
    db = tmp_path / "lat.db"
    _store_with(db, _latency_run([1.0, 1.02, 0.98, 1.01, 0.99, 1.0], uid="tbaaaaaa", rid=0), "a")
    _store_with(db, _latency_run([1.5, 1.52, 1.48, 1.51, 1.49, 1.5], uid="tbbbbbbb", rid=0), "b")
    runner = CliRunner()
    base = ["compare", "a", "b", "--metrics", "latency", "--db", str(db)]
    assert runner.invoke(app, [*base, "--threshold", "90%"]).exit_code == EXIT_REGRESSED
    calm = runner.invoke(app, [*base, "--threshold-ms", "1"])
    assert calm.exit_code == 0, calm.output
    assert "1 ms for absolute ms changes" in calm.output
    assert "--threshold-ms" in runner.invoke(app, ["compare", "--help"]).output


# ---- paired: two labels of one run, by repetition -------------------------------------------------------


def _paired_run(uid: str, *, reps: int = 10, slower: float = 0.05, fail_rep: int | None = None) -> RunRecord:
    """old and new in one run, each repetition round measuring both seconds apart: a shared drift per round
    (CV 5 %) and 1 % noise per trial; new is `slower` slower. `fail_rep`: new's trial of that round failed."""
    rng = np.random.default_rng(11)
    trials = []
    for rep in range(1, reps + 1):
        drift = 4e9 * rng.lognormal(0.0, 0.05)
        for label, level in (("old", 1.0), ("new", 1.0 - slower)):
            status = "failed" if label == "new" and rep == fail_rep else "ok"
            bps = drift * level * rng.lognormal(0.0, 0.01)
            trials.append(
                trial(len(trials) + 1, label, bps, tunnel="socat", repetition=rep, cpu_client_s=1.0, status=status)
            )
    return run(trials, uid=uid)


def test_labels_of_one_run_are_compared_paired_and_failed_partners_dropped() -> None:
    r = _paired_run("tb000001", fail_rep=3)
    res = compare_runs(r, r, label_a="old", label_b="new", threshold=0.03)
    thr = rows_by_metric(res)["throughput_bps"].result
    assert res.analysis == "paired" and res.dropped_pairs == 1
    assert thr.analysis == "paired" and thr.n_pairs == 9
    assert thr.change == pytest.approx(-0.05, abs=0.02)
    assert res.exit_code == EXIT_REGRESSED
    assert any("1 repetition(s) dropped" in n for n in res.notes)
    assert "9 pairs" in _render(res)


def test_unpaired_switch_compares_one_runs_labels_as_independent_samples() -> None:
    r = _paired_run("tb000001", fail_rep=3)
    res = compare_runs(r, r, label_a="old", label_b="new", threshold=0.03, use_pairs=False)
    thr = rows_by_metric(res)["throughput_bps"].result
    assert res.analysis == "unpaired" and "--unpaired" in res.analysis_reason
    assert thr.analysis == "unpaired" and res.dropped_pairs == 0
    assert not any("dropped" in n for n in res.notes)


def test_one_run_with_too_few_pairs_falls_back_to_unpaired() -> None:
    old = [trial(i + 1, "old", v, tunnel="socat") for i, v in enumerate(samples(4e9, 5, 0.01, 1))]  # all rep 1
    new = [trial(i + 9, "new", v, tunnel="socat") for i, v in enumerate(samples(3e9, 5, 0.01, 2))]
    r = run(old + new)
    res = compare_runs(r, r, label_a="old", label_b="new")
    assert res.analysis == "unpaired" and "fewer than 3 pairs" in res.analysis_reason
    assert rows_by_metric(res)["throughput_bps"].result.analysis == "unpaired"
    assert any("compared unpaired" in n for n in res.notes)


def test_cases_with_and_without_pairs_in_one_run_are_mixed() -> None:
    r = _paired_run("tb000001")
    extra = [trial(100 + i, lab, 4e9 + i * 1e7, tunnel="socat", flows=2) for i, lab in enumerate(["old", "new"] * 4)]
    r.trials += extra  # a second case whose trials all say repetition 1: one pair only
    res = compare_runs(r, r, label_a="old", label_b="new")
    assert res.analysis == "mixed" and "unpaired" in res.analysis_reason
    by_flows = {row.case_a.flows: row.result.analysis for row in res.rows if row.metric.name == "throughput_bps"}
    assert by_flows == {1: "paired", 2: "unpaired"}
    assert "paired where possible" in " ".join(_render(res).split())


def test_cli_compare_says_paired_for_labels_of_one_run_and_unpaired_for_two_runs(tmp_path: Path) -> None:
    db = tmp_path / "paired.db"
    _store_with(db, _paired_run("tbaaaaaa"), "pr")
    _store_with(db, one_case("old", samples(4e9, 10, 0.02, seed=1), rid=0, uid="tbbbbbbb", tunnel="socat"), "base")
    runner = CliRunner()
    paired = runner.invoke(
        app, ["compare", "pr", "--label-a", "old", "--label-b", "new", "--threshold", "3%", "--db", str(db)]
    )
    assert paired.exit_code == EXIT_REGRESSED, paired.output
    text = " ".join(paired.output.split())
    assert "paired: 10 pairs of the same run, by repetition" in text
    assert "paired t on log ratios" in text and "regression(s) beyond the threshold" in text
    assert "costlier" in text
    assert "gate: CPU/bit tunnel at ±3.0% (the tunnel's CPU time per bit, both sides" in text
    assert "throughput, CPU/bit client at ±6.0% in a Holm family of their own" in text
    two = runner.invoke(
        app, ["compare", "base", "pr", "--label-a", "old", "--label-b", "new", "--threshold", "3%", "--db", str(db)]
    )
    assert two.exit_code in (0, EXIT_REGRESSED), two.output
    text = " ".join(two.output.split())
    assert "unpaired: A and B are different runs" in text and "Mann-Whitney" in text
    assert "paired t" not in text


# ---- a result usable for a decision: warnings grouped by cause, one verdict line -------------------------


def _default_like(uid: str, seed: int, reps: int = 3) -> RunRecord:
    """A `make demo`-shaped run: 7 tunnels (direct included) x up/down, `reps` repetitions, CV ~8 %."""
    rng = np.random.default_rng(seed)
    trials = []
    for rep in range(1, reps + 1):
        for t in ("direct", "wireguard-go", "openvpn-udp", "openvpn-tcp", "ssh-forward", "socat", "stunnel"):
            for d in ("up", "down"):
                cpu = None if t == "direct" else float(rng.lognormal(0.0, 0.1))
                bps = 4e9 * float(rng.lognormal(0.0, 0.08))
                trials.append(
                    trial(len(trials) + 1, t, bps, direction=d, repetition=rep, cpu_client_s=cpu, cpu_server_s=cpu)
                )
    return run(trials, uid=uid)


def _plain(res: CompareResult) -> list[str]:
    from rich.console import Console

    console = Console(width=10_000, record=True, file=io.StringIO())
    for line in compare_lines(res):
        console.print(line, soft_wrap=True)
    return console.export_text().splitlines()


def test_warnings_of_two_default_runs_are_one_line_per_cause_with_a_count() -> None:
    res = compare_runs(_default_like("tbaaaaaa", 1), _default_like("tbbbbbbb", 2), threshold=0.03)
    assert len(res.rows) == 50  # 2 direct throughput rows + 12 tunnel cases x 4 metrics
    lines = _plain(res)
    warnings = [ln for ln in lines if ln.startswith("warning:") and "settings" not in ln]
    causes = [ln.split(" in ", 1)[0] for ln in warnings]
    assert len(causes) == len(set(causes)), warnings  # one line per cause
    assert len(lines) <= 10, lines  # before: more than 100 lines
    assert any(
        "too few repetitions for any change to be called significant in all 50 comparison(s)" in ln for ln in lines
    )
    noisy = next(ln for ln in warnings if ln.startswith("warning: noisy (CV >= 5%) in "))
    count = int(re.search(r"in (\d+) comparison\(s\)", noisy).group(1))  # type: ignore[union-attr]
    flagged = {f.subject for f in res.warnings() if f.warning.code == "high-cv"}
    assert count == len(flagged) > 4 and f"and {count - 4} more" in noisy  # 4 named, the rest counted
    assert lines[-1].startswith("verdict: 0 regressed, 0 improved, 0 unchanged, 48 undecided (")
    # the main tier (the tunnel's CPU per bit, 12 cases) needs 6 per side; the wide one (36) 7, as a note says
    assert "no change is detectable at these repetitions: use --repeat 6 or more" in lines[-1]
    assert any("36 gated comparisons, Holm-adjusted" in ln and "use --repeat 7 or more" in ln for ln in lines)


def _case(label: str, median: float, cv: float, seed: int, reps: int = 8) -> list[float]:
    return samples(median, reps, cv, seed)


def _four_outcomes(threshold: float = 0.03) -> CompareResult:
    """Four tunnels: `slow` 20 % slower, `fast` 20 % faster, `same` steady (CV 0.3 %), `noisy` (CV 15 %)."""
    shape = {
        "slow": (4e9, 3.2e9, 0.003),
        "fast": (4e9, 4.8e9, 0.003),
        "same": (4e9, 4e9, 0.003),
        "noisy": (4e9, 4e9, 0.15),
    }
    ta: list = []
    tb: list = []
    for k, (label, (ma, mb, cv)) in enumerate(shape.items()):
        for side, median, out in (("a", ma, ta), ("b", mb, tb)):
            for i, v in enumerate(_case(label, median, cv, seed=10 * k + (side == "b"))):
                out.append(trial(len(out) + 1, label, v, tunnel="socat", repetition=i + 1, cpu_client_s=1.0))
    return compare_runs(run(ta, rid=1, uid="tba"), run(tb, rid=2, uid="tbb"), threshold=threshold)


def test_verdict_counts_each_gated_comparison_once_and_matches_the_exit_status() -> None:
    res = _four_outcomes()
    outcomes: dict[str, set[str]] = {}
    for r in res.rows:
        outcomes.setdefault(r.case_a.label, set()).add(res.outcome(r))
    assert outcomes == {"slow": {"regressed"}, "fast": {"improved"}, "same": {"unchanged"}, "noisy": {"undecided"}}
    assert res.tally() == {"regressed": 3, "improved": 3, "unchanged": 3, "undecided": 3}  # 3 metrics per case
    assert res.exit_code == EXIT_REGRESSED
    last = _plain(res)[-1]
    assert last.startswith("verdict: 3 regressed, 3 improved, 3 unchanged, 3 undecided (unpaired Mann-Whitney U, ")
    assert (
        "Holm over 4 at alpha 0.05, threshold 3.0%; throughput, CPU/bit client: Holm over 8 at alpha 0.05, "
        "threshold 6.0%; " in last
    )
    assert "; smallest detectable change ±" in last and "(throughput, CPU/bit client: ±" in last
    assert last.endswith(f"→ exit {EXIT_REGRESSED}, regression")


def test_without_a_threshold_a_finite_mde_is_enough_for_unchanged() -> None:
    res = _four_outcomes(threshold=0.0)
    assert res.tally()["undecided"] == 0 and res.tally()["unchanged"] == 6
    mdes = sorted(r.result.min_detectable_effect for r in res.rows if not r.wide)
    assert f"smallest detectable change ±{mdes[0]:.1%} to ±{mdes[-1]:.1%}" in _plain(res)[-1]


def test_verdict_without_regression_exits_0_and_names_the_paired_analysis() -> None:
    r = _paired_run("tb000001", slower=0.0)
    res = compare_runs(r, r, label_a="old", label_b="new")
    assert res.exit_code == 0 and res.tally()["regressed"] == 0
    last = _plain(res)[-1]
    assert last.startswith("verdict: 0 regressed, ") and "(paired t on log ratios, " in last
    assert last.endswith("→ exit 0, no regression")


def test_cli_compare_ends_with_the_verdict_line(ab_store: Path) -> None:
    slow = CliRunner().invoke(app, ["compare", "fast", "slow", "--db", str(ab_store), "--threshold", "3%"])
    assert slow.exit_code == EXIT_REGRESSED
    last = " ".join(slow.output.strip().splitlines()[-3:])  # the terminal may wrap it
    assert re.search(r"verdict: 3 regressed, 0 improved, 0 unchanged, 0 undecided .*→ exit 1, regression$", last)


def test_warm_windows_are_compared_as_one_pair_per_pair_of_bring_ups() -> None:
    # 12 rounds on 3 pairs of bring-ups (4 windows each); each bring-up has its own luck, shared by its windows
    rng = np.random.default_rng(5)
    trials = []
    for unit in range(3):
        luck = {"old": rng.lognormal(0.0, 0.05), "new": rng.lognormal(0.0, 0.05)}
        for w in range(4):
            rep = unit * 4 + w + 1
            for label in ("old", "new"):
                t = trial(len(trials) + 1, label, 4e9 * luck[label], tunnel="socat", repetition=rep, cpu_client_s=1.0)
                t.params["warm"] = {"bringup": f"t{unit}{label}w", "window": w + 1}
                trials.append(t)
    r = run(trials)
    res = compare_runs(r, r, label_a="old", label_b="new")
    thr = rows_by_metric(res)["throughput_bps"].result
    assert thr.analysis == "paired" and thr.n_pairs == 3  # not 12: the windows of one bring-up are one unit
    assert "warm windows as one pair per pair of bring-ups" in res.analysis_reason
    # the unit's values are its windows' geometric mean (here the bring-up's luck x 4e9)
    a, b = pair_values(pair_trials(r.trials[0::2], r.trials[1::2])[0], rows_by_metric(res)["throughput_bps"].metric)
    assert len(a) == len(b) == 3
    # cold trials of the same run stay one pair each
    for t in r.trials:
        del t.params["warm"]
    assert rows_by_metric(compare_runs(r, r, label_a="old", label_b="new"))["throughput_bps"].result.n_pairs == 12


def test_cli_compare_target_says_the_mde_reached_and_what_reaches_the_target(tmp_path: Path) -> None:
    from tunbench.report.precision import round_seconds

    db = tmp_path / "paired.db"
    r = _paired_run("tbaaaaaa")
    for t in r.trials:  # one repetition round every 6.5 s
        t.started_at = f"2026-01-01T00:{(t.repetition - 1) * 6.5 // 60:02.0f}:{(t.repetition - 1) * 6.5 % 60:04.1f}"
    assert round_seconds(r) == pytest.approx(6.5)
    _store_with(db, r, "pr")
    runner = CliRunner()
    base = ["compare", "pr", "--label-a", "old", "--label-b", "new", "--db", str(db)]
    far = runner.invoke(app, [*base, "--target", "1%"])
    text = " ".join(far.output.split())
    assert re.search(r"MDE reached: ±[0-9.]+% \(the largest of 1 gated: ", text), text
    assert re.search(r"MDE reached: ±[0-9.]+% \(the largest of 2 in the wide tier: .*\); ", text), text
    m = re.search(
        r"for ±1\.0% about (\d+) pairs in all, (\d+) more; at this run's pace \(6\.5 s per repetition\)", text
    )
    assert m and int(m.group(1)) - int(m.group(2)) == 10, text
    assert "--target-mde 1.0% --budget" in text
    near = runner.invoke(app, [*base, "--target", "50%"])
    assert "the target ±50.0% is reached" in " ".join(near.output.split())
    bad = runner.invoke(app, [*base, "--target", "0"])
    assert isinstance(bad.exception, CompareError) and bad.exception.exit_code == 2
    assert "--target '0': must be above 0%" in str(bad.exception)


def test_two_warm_runs_compare_bring_ups_not_windows() -> None:
    # unpaired (two runs): each side's independent units are its bring-ups, each its windows' mean
    def warm_run(uid: str, level: float) -> RunRecord:
        trials = []
        for unit in range(4):
            for w in range(3):
                t = trial(len(trials) + 1, "x", level * (1 + 0.01 * w), tunnel="socat", repetition=unit * 3 + w + 1)
                t.params["warm"] = {"bringup": f"t{unit}w", "window": w + 1}
                trials.append(t)
        return run(trials, uid=uid)

    res = compare_runs(warm_run("tb00000a", 4e9), warm_run("tb00000b", 3e9))
    thr = rows_by_metric(res)["throughput_bps"].result
    assert thr.analysis == "unpaired" and (thr.baseline.n, thr.candidate.n) == (4, 4)  # not 12 windows each
    from tunbench.report.precision import windows_per_bringup

    assert windows_per_bringup(warm_run("tb00000c", 1e9)) == 3.0
    assert windows_per_bringup(run([trial(1, "x", 1e9)])) == 1.0


# ---- interfered trials (issue 27) -----------------------------------------------------------------


def _interfere(r: RunRecord, seqs: set[int], why: str = "another tunbench run (tb1a2b3c)") -> RunRecord:
    for t in r.trials:
        if t.seq in seqs:
            t.metrics["interfered"] = 1.0
            t.params["interference"] = why
        else:
            t.metrics.setdefault("interfered", 0.0)
    return r


def test_interfered_trials_are_left_out_with_their_partners_and_counted() -> None:
    r = _paired_run("tb000001")
    r.trials[4].metrics["throughput_bps"] = 1e8  # rep 3, old: disturbed to a tenth
    _interfere(r, {r.trials[4].seq})
    res = compare_runs(r, r, label_a="old", label_b="new", threshold=0.03)
    thr = rows_by_metric(res)["throughput_bps"].result
    assert thr.n_pairs == 9  # the whole pair went
    (note,) = [n for n in res.notes if "interfered" in n]
    assert note.startswith("left out 1 interfered trial and 1 partner trial(s) of their pairs: another tunbench")
    assert "tb1a2b3c" in note and "--include-interfered" in note
    kept = compare_runs(r, r, label_a="old", label_b="new", threshold=0.03, include_interfered=True)
    assert rows_by_metric(kept)["throughput_bps"].result.n_pairs == 10
    assert not any("interfered" in n for n in kept.notes)


def test_interfered_trials_of_two_runs_are_left_out_one_by_one() -> None:
    a = one_case("socat", samples(4e9, 6, 0.02, seed=1), rid=1, uid="tba")
    b = _interfere(one_case("socat", samples(4e9, 6, 0.02, seed=2), rid=2, uid="tbb"), {1, 2}, "steal 12% > 5%")
    res = compare_runs(a, b)
    thr = rows_by_metric(res)["throughput_bps"].result
    assert (thr.baseline.n, thr.candidate.n) == (6, 4)
    assert "B: left out 2 interfered trials: steal 12% > 5%" in " ".join(res.notes)
    old = one_case("socat", samples(4e9, 6, 0.02, seed=2), rid=3, uid="tbc")  # no metric at all: clean
    assert rows_by_metric(compare_runs(a, old))["throughput_bps"].result.candidate.n == 6


def test_cli_include_interfered_flag(tmp_path: Path) -> None:
    r = _interfere(_paired_run("tb000001"), {5})
    db = tmp_path / "r.db"
    _store_with(db, r, "pair")
    runner = CliRunner()
    out = runner.invoke(app, ["compare", "pair", "--label-a", "old", "--label-b", "new", "--db", str(db)]).output
    assert "left out 1 interfered trial" in out
    out = runner.invoke(
        app, ["compare", "pair", "--label-a", "old", "--label-b", "new", "--include-interfered", "--db", str(db)]
    ).output
    assert "left out" not in out


# ---- counted work (run --count-work) ---------------------------------------------------------------


def _work_run(syscalls_per_mb: list[float], batch: list[float], *, uid: str, rid: int, tunnel: str = "x") -> RunRecord:
    vals = samples(4e9, len(syscalls_per_mb), 0.01, seed=rid)
    return run(
        [
            trial(
                i + 1,
                tunnel,
                v,
                repetition=i + 1,
                tunnel=tunnel,
                extra={
                    "work.client.syscalls_per_mb": s,
                    "work.client.packets_per_send": p,
                    "work.client.syscalls": 1e6,
                },
            )
            for i, (v, s, p) in enumerate(zip(vals, syscalls_per_mb, batch, strict=True))
        ],
        rid=rid,
        uid=uid,
    )


def test_counted_work_is_compared_with_its_direction_and_never_gates() -> None:
    a = _work_run([1000, 1010, 990, 1005, 995, 1002], [1.0, 1.01, 0.99, 1.0, 1.02, 0.98], uid="tba", rid=1)
    b = _work_run([2000, 2010, 1990, 2005, 1995, 2002], [1.6, 1.61, 1.59, 1.6, 1.62, 1.58], uid="tbb", rid=2)
    res = compare_runs(a, b, threshold=0.03)
    rows = rows_by_metric(res)
    sys_mb, batch = rows["work.client.syscalls_per_mb"], rows["work.client.packets_per_send"]
    assert "work.client.syscalls" not in rows  # raw counts scale with the bytes moved: only the ratios
    assert sys_mb.result.change == pytest.approx(1.0, rel=0.05) and sys_mb.verdict_text == "more work"
    assert batch.result.change == pytest.approx(0.6, rel=0.05) and batch.verdict_text == "more batched"
    assert not sys_mb.gated and not batch.gated
    assert sys_mb.result.family_size == 2  # their own Holm family, not the gate's
    assert rows["throughput_bps"].result.family_size == 1  # the gate: throughput alone (these trials have no CPU)
    assert res.exit_code == 0  # twice the syscalls alone is no regression
    assert not any("direct baseline changed" in n for n in res.notes)
    assert "(not gated)" in _render(res)


def test_work_kind_can_be_left_out() -> None:
    a = _work_run([1000, 1010, 990], [1.0, 1.0, 1.0], uid="tba", rid=1)
    b = _work_run([2000, 2010, 1990], [1.0, 1.0, 1.0], uid="tbb", rid=2)
    res = compare_runs(a, b, kinds=("throughput", "cpu", "latency"))
    assert not [r for r in res.rows if r.metric.kind == "work"]


def test_history_offers_counted_work_by_name_and_kind() -> None:
    from tunbench.report.history import DEFAULT_METRICS, pick_metrics

    trials = _work_run([1000, 1010, 990], [1.0, 1.0, 1.0], uid="tba", rid=1).trials
    assert [m.name for m in pick_metrics(["work"], trials)] == [
        "work.client.syscalls_per_mb",
        "work.client.packets_per_send",
    ]
    assert [m.name for m in pick_metrics(["work.client.packets_per_send"], trials)] == ["work.client.packets_per_send"]
    assert not [n for n in DEFAULT_METRICS if n.startswith("work.")]  # shown when asked for


def test_compare_target_never_advises_fewer_pairs_than_the_run_stops_on(tmp_path: Path) -> None:
    from tunbench.report.precision import MIN_STOP_PAIRS

    db = tmp_path / "few.db"
    _store_with(db, _paired_run("tbaaaaab", reps=5), "pr")
    out = CliRunner().invoke(app, ["compare", "pr", "--label-a", "old", "--label-b", "new", "--db", str(db),
                                   "--target", "1.2%"])  # fmt: skip
    m = re.search(r"for ±1\.2% about (\d+) pairs in all", " ".join(out.output.split()))
    assert m and int(m.group(1)) >= MIN_STOP_PAIRS, out.output


def test_an_interface_named_by_its_tunnels_slot_is_one_setting_across_slots() -> None:
    """Two labels in one run get a slot each (`<run>-vc`, `<run>-vc1`): the same interface, not a setting that
    one side lacks."""
    from tunbench.report.compare.settings import settings_differences

    def trials(mtu: int, slot: str) -> list[TrialRecord]:
        r = one_case("socat", samples(4e9, 5, 0.01, 1), rid=1, uid="tbaaaaaa")
        return _with_net(r, _net("bbr", mtu, "tbaaaaaa", slot=slot)).trials

    assert settings_differences(trials(1500, ""), trials(1500, "1")) == []
    assert settings_differences(trials(1500, ""), trials(9000, "1")) == [
        "settings differ: client.interfaces.<run>-vc.mtu: 1500 (A) vs 9000 (B)",
        "settings differ: server.interfaces.<run>-vc.mtu: 1500 (A) vs 9000 (B)",
    ]
