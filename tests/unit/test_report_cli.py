"""`tunbench report`: format choice, stdout vs file, errors (exporters themselves are tested per format)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.unit.report_data import demo_run
from tunbench.cli import app
from tunbench.errors import ExportError
from tunbench.report.compare import CompareError
from tunbench.store.db import Store


@pytest.fixture()
def store(store_db: Path) -> Path:
    """The two runs, in an SQLite file or on the test PostgreSQL server (a URL: only ever str()-ed)."""
    db = store_db
    with Store(db) as s:
        for uid, name in (("tbaaaaaa", "first"), ("tbbbbbbb", "second")):
            r = demo_run(reps=3)
            rid = s.create_run(
                uid=uid, name=name, tunbench_version="0.1.0", provenance=r.provenance, scenario_text="",
                scenario_hash="", scenario={},
            )  # fmt: skip
            for t in r.trials:
                s.add_trial(rid, t)
            s.finish_run(rid, "done")
    return db


def test_format_from_suffix_and_file_written(store: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "rep.html"
    res = runner.invoke(app, ["report", "first", "second", "-o", str(out), "--db", str(store)])
    assert res.exit_code == 0, res.output
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "first" in page and "second" in page
    csv_out = tmp_path / "rep.csv"
    assert runner.invoke(app, ["report", "-o", str(csv_out), "--db", str(store)]).exit_code == 0
    assert csv_out.read_text().startswith("run_id,")


def test_stdout_formats_default_to_latest(store: Path) -> None:
    runner = CliRunner()
    md = runner.invoke(app, ["report", "--format", "md", "--db", str(store)])
    assert md.exit_code == 0 and "## tunbench run second" in md.output and "first" not in md.output
    bmf = runner.invoke(app, ["report", "-f", "bmf", "1", "--db", str(store)])
    assert "socat/lan/iperf3/up/1-flow" in json.loads(bmf.output)
    js = runner.invoke(app, ["report", "-f", "json", "first", "--db", str(store)])
    assert json.loads(js.output)["run"]["uid"] == "tbaaaaaa"


def test_errors(store: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(app, ["report", "-f", "pdf", "--db", str(store)])
    assert isinstance(bad.exception, ExportError) and "choose one of" in str(bad.exception)
    two_json = runner.invoke(app, ["report", "-f", "json", "first", "second", "--db", str(store)])
    assert isinstance(two_json.exception, ExportError)
    assert bad.exception.exit_code == two_json.exception.exit_code == 2
    missing = runner.invoke(app, ["report", "nope", "--db", str(store)])
    assert isinstance(missing.exception, CompareError) and "no run 'nope'" in str(missing.exception)
