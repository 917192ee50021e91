"""A dry run tells the truth about the run it plans: the budget caps its estimate, it states the stop rule and
warns when the stop cannot be reached inside the budget; a build that is not there fails it; its header names
what the flags replaced; and an option is never taken as another option's value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunbench.cli.app import app

AB = ["-t", "wireguard-go[label=a]", "-t", "wireguard-go[label=b]", "--no-direct"]


def _dry(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["run", "--dry-run", *args], env={"COLUMNS": "300"})
    return res.exit_code, res.output


def _minutes(text: str) -> float:
    m = re.search(r"about ([0-9.]+) (s|min)", text)
    assert m is not None, text
    return float(m.group(1)) * (60.0 if m.group(2) == "min" else 1.0)


def test_the_estimate_is_capped_by_the_budget_and_the_stop_is_stated() -> None:
    code, out = _dry(*AB, "--target-mde", "3%", "--budget", "2m")
    assert code == 0, out
    (size,) = [line for line in out.splitlines() if " × " in line]
    assert _minutes(size) <= 120.0, size  # it said "about 2.6 min" under --budget 2m
    assert "fit in the budget (2m)" in size
    assert any(line.startswith("stop: target ±3% within 2m") for line in out.splitlines()), out


def test_a_budget_that_cannot_hold_the_stops_pairs_is_warned_of() -> None:
    # four cases of ~6 s: about 5 rounds fit in 2 minutes, and the stop waits for 10 pairs
    code, out = _dry(*AB, "--target-mde", "3%", "--budget", "2m")
    assert "warning: the stop needs at least 10 pairs per case" in out, out
    assert "cannot stop on its target" in out
    # the README's line (one direction, 2 s trials) fits: no warning
    code, out = _dry(*AB, "--direction", "up", "--duration", "2", "--omit", "1", "--target-mde", "3%", "--budget", "2m")
    assert code == 0 and "warning: the stop needs" not in out, out


def test_a_missing_build_fails_the_dry_run_and_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    from tunbench.cli import main

    missing = tmp_path / "pr" / "wireguard-go"
    argv = ["run", "--dry-run", "-t", f"wireguard-go[bin={missing},label=pr]", "-t", "wireguard-go[label=base]"]
    monkeypatch.setattr(sys, "argv", ["tunbench", *argv, "--no-direct"])
    with pytest.raises(SystemExit) as exc:
        main()
    out = capsys.readouterr().err
    assert exc.value.code == 3, out
    assert str(missing) in out and "no such file" in out
    assert "make deps" not in out  # make deps cannot install a build


def test_the_header_says_what_the_flags_replaced() -> None:
    _, out = _dry("-t", "socat", "--no-direct", "--direction", "up", "--repeat", "1")
    assert out.splitlines()[0] == "dry run of <default scenario>, its tunnels from -t: nothing was created", out


def test_one_case_and_one_repetition_are_singular() -> None:
    _, out = _dry("-t", "socat", "--no-direct", "--direction", "up", "--repeat", "1")
    assert "1 case × 1 repetition = 1 trial, about" in out, out
    assert "1 cases" not in out and "1 repetitions" not in out


@pytest.mark.parametrize(
    ("argv", "option", "value"),
    [
        (["run", "--commit", "abc", "--branch", "--dry-run"], "--branch", "--dry-run"),
        (["run", "--db", "-t", "socat", "--dry-run"], "--db", "-t"),
        (["link", "selftest", "--json", "--quick"], "--json", "--quick"),
        (["compare", "a", "b", "--label-a", "--label-b", "x"], "--label-a", "--label-b"),
    ],
)
def test_an_option_is_never_taken_as_another_options_value(argv: list[str], option: str, value: str) -> None:
    res = CliRunner().invoke(app, argv, env={"COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    said = res.output.replace("\n", " ")
    assert f"Invalid value for {option}: it takes a value, but the next word is the option {value}" in said, said


def test_an_explicit_value_and_a_negative_number_still_pass() -> None:
    code, out = _dry("-t", "socat", "--no-direct", "--direction", "up", "--repeat", "5", "--branch=--weird")
    assert code == 0 and "branch --weird" in out, out


def test_the_work_gates_stop_names_the_counted_figure() -> None:
    code, out = _dry(*AB, "-w", "udp", "--omit", "0", "--count-instructions", "--target-mde", "1%", "--budget", "75s")
    assert code == 0, out
    said = " ".join(out.split())
    assert "pairs until the largest paired MDE of the tunnel's instructions/byte (the work gate" in said, said
    assert "CPU/bit delivered" not in said, said
