"""`tunbench calibrate` without root: its flags, and what it prints from a stored A/A run (cli/calibrate.py,
report/calibration.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from tests.unit.report_data import run, trial
from tunbench.cli import app
from tunbench.cli.calibrate import labelled
from tunbench.cli.options import parse_budget, parse_until
from tunbench.errors import ConfigError
from tunbench.report.calibration import calibration_lines, calibration_record, noise_per_metric
from tunbench.report.compare import Gate
from tunbench.results import RunRecord


@pytest.mark.parametrize(("text", "want"), [("60s", 60.0), ("2m", 120.0), ("1.5min", 90.0), ("1h", 3600)])
def test_budget_takes_seconds_minutes_and_hours(text: str, want: float) -> None:
    assert parse_budget(text) == want


@pytest.mark.parametrize("text", ["", "abc", "0s", "-5s", "2 weeks"])
def test_bad_budget_is_refused(text: str) -> None:
    with pytest.raises(typer.BadParameter, match="--budget|60s"):
        parse_budget(text)


@pytest.mark.parametrize("text", ["2", "90", "1.5"])
def test_a_bare_number_budget_is_refused_with_both_readings(text: str) -> None:
    # it was read as seconds: --budget 2 ran for two seconds where two minutes were meant
    with pytest.raises(typer.BadParameter, match=rf"give a unit: {text}s for {text} seconds, {text}m for"):
        parse_budget(text)


def test_the_two_sides_are_labelled_a_and_b() -> None:
    assert labelled("wireguard-go", "a") == "wireguard-go[label=a]"
    assert labelled("openvpn-udp[cipher=AES-128-GCM]", "b") == "openvpn-udp[cipher=AES-128-GCM,label=b]"
    with pytest.raises(typer.BadParameter, match="labels"):
        labelled("socat[label=x]", "a")


def _aa_run(pairs: int = 8, seed: int = 3) -> RunRecord:
    """socat as labels a and b in paired blocks: a drift per pair (CV 5 %) and 2 % noise per trial."""
    rng = np.random.default_rng(seed)
    trials = []
    for rep in range(1, pairs + 1):
        drift = 4e9 * rng.lognormal(0.0, 0.05)
        for label in ("b", "a") if rep % 2 else ("a", "b"):
            bps = drift * rng.lognormal(0.0, 0.02)
            cpu = float(rng.lognormal(0.0, 0.03))
            trials.append(trial(len(trials) + 1, label, bps, tunnel="socat", repetition=rep, cpu_client_s=cpu))
    return run(trials, name="calibrate-socat")


def _text(lines: list[object]) -> str:
    console = Console(width=250, record=True)
    for line in lines:
        console.print(line)
    return console.export_text()


def test_noise_per_metric_pairs_by_repetition_at_the_gates_level_per_tier() -> None:
    noise = noise_per_metric(_aa_run(), pair_s=8.0, overhead_s=5.0, target=0.03)
    # no server CPU in this run: the tunnel's CPU per bit (its client side's) in the main tier, throughput and
    # the client side's in the wide one
    assert [(m.title, round(nb.level, 9), nb.target) for m, nb in noise] == [
        ("CPU/bit tunnel", 0.05, 0.03),
        ("throughput", 0.025, 0.06),
        ("CPU/bit client", 0.025, 0.06),
    ]
    for _, nb in noise:
        assert nb.n_pairs == 8
        assert 0.005 < nb.pair_sd < 0.1 and math.isfinite(nb.mde)
        assert [p.pairs for p in nb.projections] == [6, 14, 36, 74]  # (budget - 5 s) / 8 s
    every = noise_per_metric(_aa_run(), pair_s=8.0, overhead_s=5.0, target=0.03, gate=Gate("all"))
    assert [(m.title, round(nb.level, 9), nb.target) for m, nb in every] == [
        ("throughput", round(0.05 / 3, 9), 0.03),
        ("CPU/bit tunnel", round(0.05 / 3, 9), 0.03),
        ("CPU/bit client", round(0.05 / 3, 9), 0.03),
    ]


def test_the_calibration_is_recorded_with_its_gate() -> None:
    noise = noise_per_metric(_aa_run(), pair_s=8.0, overhead_s=5.0, target=0.03)
    rec = calibration_record(noise, Gate())
    assert rec["gate"] == "cost" and rec["wide"] == 2.0 and rec["pair_s"] == 8.0
    metrics = rec["metrics"]
    assert isinstance(metrics, dict) and list(metrics) == ["cpu_s_per_bit", "throughput_bps", "cpu_s_per_bit.client"]
    thr = metrics["throughput_bps"]
    assert thr["target"] == 0.06 and thr["pairs"] == 8 and set(thr["mde_per_budget_s"]) == {"60", "120", "300", "600"}
    json.dumps(rec, allow_nan=False)  # storable as it is


def test_calibration_prints_the_noise_the_mde_per_budget_the_assumption_and_the_aa_verdict() -> None:
    text = _text(calibration_lines(_aa_run(), pair_s=8.0, overhead_s=5.0, target=0.03))
    assert "calibration: A/A of socat · lan · up · 1 flow as labels a and b, 8 ok pair(s); 8.0 s per pair" in text
    header = next(line for line in text.splitlines() if "metric" in line and "trial CV" in line)
    for col in ("gate", "pair sd [CI]", "MDE now", "1 min", "2 min", "5 min", "10 min", "for its target"):
        assert col in header
    row = next(line for line in text.splitlines() if "throughput" in line and "±" in line)
    assert "(14)" in row and "pairs," in row and "±6.0% · 0.025" in row
    assert "gate: CPU/bit tunnel at ±3.0%" in " ".join(text.split())
    assert "1/sqrt(pairs)" in " ".join(text.split())
    assert "verdict: 0 regressed" in text


def test_too_few_pairs_say_so() -> None:
    r = _aa_run(pairs=1)
    assert "nothing to calibrate" in _text(calibration_lines(r, pair_s=8.0, overhead_s=5.0, target=0.03))


def test_help_states_the_assumption_and_a_too_small_budget_is_refused(tmp_path: Path) -> None:
    runner = CliRunner()
    out = " ".join(runner.invoke(app, ["calibrate", "--help"], env={"COLUMNS": "200"}).output.split())
    assert "--budget" in out and "1/sqrt(pairs)" in out and "calibrate-<tunnel>" in out
    res = runner.invoke(app, ["calibrate", "-t", "direct", "--budget", "3s", "--db", str(tmp_path / "c.db")])
    assert isinstance(res.exception, ConfigError) and res.exception.exit_code == 2
    assert "at least 2" in str(res.exception)


def test_until_is_the_next_time_the_clock_shows_it() -> None:
    import datetime

    now = datetime.datetime(2026, 11, 24, 13, 0, 0)
    assert parse_until("14:30", now) == 5400.0
    assert parse_until("9:05:30", now) == (20 * 3600 + 5 * 60 + 30)  # already past today: tomorrow
    assert parse_until("2026-11-24T13:02", now) == 120.0
    aware = datetime.datetime(2026, 11, 24, 13, 2).astimezone().isoformat()  # this machine's offset, given
    assert parse_until(aware, now) == 120.0
    for bad in ("25:00", "14h30", "2026-11-24T12:00", "soon"):
        with pytest.raises(typer.BadParameter):
            parse_until(bad, now)


def test_interfered_pairs_are_left_out_and_said() -> None:
    r = _aa_run()
    bad = r.trials[2]  # pair 2
    bad.metrics["interfered"] = 1.0
    bad.params["interference"] = "foreign CPU 45% of a core > 20%"
    noise = noise_per_metric(r, pair_s=8.0, overhead_s=5.0, target=0.03)
    assert all(nb.n_pairs == 7 for _, nb in noise)
    text = " ".join(_text(calibration_lines(r, pair_s=8.0, overhead_s=5.0, target=0.03)).split())
    assert "left out 1 interfered trial and 1 partner trial(s) of their pairs: foreign CPU 45% of a core" in text
    kept = noise_per_metric(r, pair_s=8.0, overhead_s=5.0, target=0.03, include_interfered=True)
    assert all(nb.n_pairs == 8 for _, nb in kept)
    assert "--include-interfered" in " ".join(CliRunner().invoke(app, ["calibrate", "--help"]).output.split())


def test_dry_run_creates_nothing_and_needs_no_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the README's A/B sequence dry-runs its run; calibrate, beside it, had no dry run
    from tunbench.host import ledger as state

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")
    monkeypatch.delenv("TUNBENCH_DB", raising=False)
    args = ["calibrate", "-t", "socat", "--budget", "2m", "--dry-run"]
    res = CliRunner().invoke(app, args, terminal_width=200)
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "dry run of calibrate: an A/A of socat as labels a and b" in out and "nothing was created" in out
    assert "fit in the budget (2m)" in out and "stop: pairs until the budget (2m) is spent, at least 2" in out
    assert "--gate cost" in out and "CPU per bit delivered at ±3.0%" in out
    assert "the same A/A as a run: tunbench run -t 'socat[label=a]' -t 'socat[label=b]' --no-direct" in out
    assert list(tmp_path.iterdir()) == []  # no store, no state, no ledger
    pinned = CliRunner().invoke(app, [*args[:-1], "--pairs", "4", "--dry-run"], terminal_width=200)
    assert pinned.exit_code == 0 and "stop: after 4 pairs (--pairs)" in pinned.output, pinned.output
    assert list(tmp_path.iterdir()) == []


def test_the_work_gates_calibration_takes_the_counter_and_says_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tunbench.host import ledger as state

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")
    monkeypatch.delenv("TUNBENCH_DB", raising=False)
    args = ["calibrate", "-t", "wireguard-go", "--count-instructions", "--dry-run"]
    res = CliRunner().invoke(app, [*args, "--instr-counter", "callgrind"], terminal_width=200)
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "instructions counted by callgrind (--instr-counter callgrind" in out
    assert "-w udp --count-instructions --instr-counter callgrind --no-direct" in out
    auto = " ".join(CliRunner().invoke(app, args, terminal_width=200).output.split())
    assert "--instr-counter" not in auto.split("the same A/A as a run:")[1]
    bad = CliRunner().invoke(app, [*args, "--instr-counter", "bogus"], terminal_width=200)
    assert bad.exit_code != 0 and "run.instr_counter: Input should be 'auto', 'perf' or 'callgrind'" in str(
        bad.exception
    )


def test_a_dry_run_says_perf_cannot_count_a_tunnel_of_two_modes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenVPN's count comes in two modes that only callgrind's split by shared object tells apart: with perf
    forced, the dry run says before the run that its daemons will not be counted, and what to use instead."""
    from tunbench.host import ledger as state

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")
    monkeypatch.delenv("TUNBENCH_DB", raising=False)
    args = ["calibrate", "-t", "openvpn-udp", "--count-instructions", "--dry-run", "--instr-counter"]
    perf = CliRunner().invoke(app, [*args, "perf"], terminal_width=200)
    assert perf.exit_code == 0, perf.output
    out = " ".join(perf.output.split())
    assert "note: openvpn-udp (a, b): not counted: perf gives one total" in out
    assert "count this tunnel with --instr-counter callgrind" in out
    grind = CliRunner().invoke(app, [*args, "callgrind"], terminal_width=200)
    assert grind.exit_code == 0, grind.output
    assert "perf gives one total" not in grind.output
    wg = CliRunner().invoke(app, ["calibrate", "-t", "wireguard-go", *args[3:], "perf"], terminal_width=200)
    assert "perf gives one total" not in wg.output
