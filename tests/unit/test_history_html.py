"""The history page of `tunbench report --history` (a real browser draws it: tests/integration/test_report_html.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from tests.unit.history_data import STEP_AT, make_store
from tunbench.cli import app
from tunbench.report.history import HistoryError, build, load
from tunbench.report.html.history import render


def chart_ids(page: str) -> list[str]:
    return re.findall(r'<div id="([^"]+)" class="plotly-graph-div"', page)


def _figure(page: str, div_id: str) -> dict:  # type: ignore[type-arg]
    """The data and layout plotly was given for one chart."""
    m = re.search(rf'Plotly\.newPlot\(\s*"{div_id}",\s*(\[.*?\]),\s*(\{{.*?\}}),\s*\{{"displaylogo"', page, re.S)
    assert m, div_id
    return {"data": json.loads(m.group(1)), "layout": json.loads(m.group(2))}


def test_series_with_ci_band_and_change_points(tmp_path: Path) -> None:
    page = render(build(load(make_store(tmp_path / "h.db"))))
    assert page.startswith("<!DOCTYPE html>") and "cdn.plot.ly" not in page.replace("https://cdn.plot.ly", "")
    assert "<script src=" not in page  # plotly.js is embedded: the page works offline
    ids = chart_ids(page)
    assert ids == ["h0-0", "h0-1", "h0-2"]  # one case: throughput, CPU per bit of client and of server
    assert page.count("Plotly.newPlot") == len(ids) and len(re.findall(r"plotly\.js v\d", page)) == 1
    fig = _figure(page, "h0-0")
    names = [t.get("name") for t in fig["data"]]
    assert "median" in names and "CI of the median" in names
    band = next(t for t in fig["data"] if t.get("name") == "CI of the median")
    assert band["fill"] == "tonexty" and len(band["y"]) == 37
    med = next(t for t in fig["data"] if t.get("name") == "median")
    assert med["x"] == list(range(1, 38)) and 900 < med["y"][0] < 1100  # Mbit/s
    (line,) = [s for s in fig["layout"]["shapes"] if s["type"] == "line"]
    assert line["x0"] == STEP_AT + 0.5 and line["line"]["color"] == "#d62728"  # a regression, in red
    (note,) = fig["layout"]["annotations"]
    assert note["text"].startswith("regression -6.")
    assert fig["layout"]["xaxis"]["ticktext"][STEP_AT] == f"c{STEP_AT:03d}"
    assert "Change points" in page and 'class="bad">regression' in page
    assert "2 left out (status not done: 1 interrupted, 1 killed)" in page


def test_no_change_point_and_escaping(tmp_path: Path) -> None:
    h = build(load(make_store(tmp_path / "h.db"), "bench-2"), machine="bench-2")
    page = render(h)
    assert "No change point in any series." in page and len(chart_ids(page)) == 3
    h.machine = type(h.machine)("x", "<script>alert(1)</script>", "cpu", "6.1")
    assert "<script>alert(1)" not in render(h)


def test_report_history_command(tmp_path: Path) -> None:
    db = make_store(tmp_path / "h.db")
    out = tmp_path / "history.html"
    runner = CliRunner()
    res = runner.invoke(app, ["report", "--history", "-o", str(out), "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert chart_ids(out.read_text()) == ["h0-0", "h0-1", "h0-2"]
    for bad in (["report", "--history", "1"], ["report", "--history", "-f", "csv"], ["report", "--machine", "x"]):
        r = runner.invoke(app, [*bad, "--db", str(db)])
        assert isinstance(r.exception, HistoryError), bad
