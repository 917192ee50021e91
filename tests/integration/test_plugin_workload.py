"""A workload is a plug-in: one file (ping_workload.py, a toy) and one registry line, and the table,
the HTML report, the JSON export and `doctor` all show it, with nothing else edited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.integration.helpers import RUN_LINE, STARTED
from tests.integration.ping_workload import PingWorkload, parse
from tunbench import workloads
from tunbench.cli import app


def test_parse_ping_summary() -> None:
    out = "--- x ping statistics ---\n20 packets transmitted, 19 received, 5% packet loss, time 950ms\n"
    out += "rtt min/avg/max/mdev = 0.031/0.045/0.102/0.010 ms\n"
    assert parse(out) == {"ping.min_ms": 0.031, "ping.avg_ms": 0.045, "ping.max_ms": 0.102, "ping.loss": 0.05}


def test_a_new_workload_shows_in_table_html_json_and_doctor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(workloads.REGISTRY, "ping", PingWorkload())  # the one registry line
    runner = CliRunner()
    db = tmp_path / "r.db"
    scenario = tmp_path / "ping.toml"
    scenario.write_text(
        '[run]\ntunnels = ["wireguard-go"]\nrepeat = 1\n[workload]\nkind = ["ping"]\n'
        "[workload.ping]\ncount = 10\ninterval_s = 0.02\n"
    )
    res = runner.invoke(app, ["run", str(scenario), "--db", str(db)], env={"COLUMNS": "200"})
    STARTED.update(RUN_LINE.findall(res.output))
    assert res.exit_code == 0, res.output
    # the progress lines and the table: the workload's own headline and columns
    assert "direct · lan · ping · rep 1: RTT avg ms" in res.output
    assert "ping (median of repetitions)" in res.output and "RTT avg ms" in res.output
    assert "ICMP echo through the tunnel (toy workload)" in res.output

    html = tmp_path / "r.html"
    res = runner.invoke(app, ["report", "--db", str(db), "-o", str(html)])
    assert res.exit_code == 0, res.output
    page = html.read_text()
    assert '<h4 id="r0-workload-ping">ping (median of repetitions)</h4>' in page
    assert ">RTT avg ms</th>" in page and ">wireguard-go</td>" in page

    out = tmp_path / "r.json"
    res = runner.invoke(app, ["export", "--db", str(db), "-o", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    trials = [t for t in doc["trials"] if t["workload"] == "ping"]
    assert {t["label"] for t in trials} == {"direct", "wireguard-go"}
    for t in trials:
        assert t["status"] == "ok", t.get("error")
        assert 0 < t["metrics"]["ping.avg_ms"] < 1000 and t["metrics"]["ping.loss"] < 0.5

    res = runner.invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert "workload ping: uses ping" in res.output
