"""Every exit status means one thing: 1 is a verdict of "regressed" (or a failed check) and never an error. A
malformed export is invalid input (2), an error that stops a command is 6, and a bug in tunbench is 70, with
its traceback in a log file rather than on the terminal."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.unit.report_data import run, trial
from tunbench.cli import main
from tunbench.errors import EXIT_ERROR, EXIT_INTERNAL, EXIT_REGRESSED, TunbenchError
from tunbench.report.exporters.json import render


def _export(tmp_path: Path, name: str, *, bad: object = None) -> Path:
    trials = [trial(k, "wireguard-go", 1e9 + k, repetition=k, cpu_client_s=0.5, cpu_server_s=0.5) for k in (1, 2, 3)]
    doc = json.loads(render(run(trials)))
    if bad is not None:
        doc["trials"][1]["metrics"]["throughput_bps"] = bad
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _main(monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    monkeypatch.setattr(sys, "argv", ["tunbench", *argv])
    with pytest.raises(SystemExit) as exc:
        main()
    code = exc.value.code
    return code if isinstance(code, int) else 0 if code is None else 1


@pytest.mark.parametrize("bad", ["4.1e9", [1, 2], True])
def test_a_metric_that_is_not_a_number_is_invalid_input_not_a_regression(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], bad: object
) -> None:
    a, b = _export(tmp_path, "a.json"), _export(tmp_path, "b.json", bad=bad)
    code = _main(monkeypatch, "compare", str(a), str(b), "--db", str(tmp_path / "none.db"))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "metric 'throughput_bps' must be a number or null" in err and "trial 2" in err, err
    assert "Traceback" not in err


def test_a_bug_exits_70_with_the_traceback_in_a_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tunbench.report import compare as report

    def boom(*args: object, **kwargs: object) -> None:
        raise ValueError("math domain error, say")

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(report, "load_run", boom)
    a = _export(tmp_path, "a.json")
    code = _main(monkeypatch, "compare", str(a), str(a))
    err = capsys.readouterr().err
    assert code == EXIT_INTERNAL == 70
    assert code != EXIT_REGRESSED
    assert "Internal error: ValueError: math domain error, say" in err and "Traceback" not in err, err
    (log,) = (tmp_path / "state" / "tunbench").glob("tunbench-crash-*.log")
    assert str(log) in err.replace("\n", "")
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "ValueError: math domain error, say" in text
    assert "compare" in text  # the command line


def test_an_error_that_stops_a_command_is_not_read_as_a_regression(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from tunbench.report import compare as report

    def fails(*args: object, **kwargs: object) -> None:
        raise TunbenchError("cannot open result store: connection refused")

    monkeypatch.setattr(report, "load_run", fails)
    a = _export(tmp_path, "a.json")
    code = _main(monkeypatch, "compare", str(a), str(a))
    assert code == EXIT_ERROR == 6
    assert capsys.readouterr().err.startswith("Error: cannot open result store")
