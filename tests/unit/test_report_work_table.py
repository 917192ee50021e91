"""The counted-work table of the HTML report (report/work_table.py)."""

from __future__ import annotations

from tests.unit.report_data import run, trial
from tunbench.report.html import page as run_page
from tunbench.report.work_table import work_rows, work_table_html
from tunbench.results import TrialRecord


def _trials() -> list[TrialRecord]:
    out = []
    for i, spm in enumerate([1000.0, 1200.0, 1100.0]):
        t = trial(i + 1, "socat", 4e9, repetition=i + 1, cpu_client_s=1.0)
        t.metrics.update({"work.client.syscalls_per_mb": spm, "work.client.read_per_mb": 120.0 + i})
        t.params["work"] = {"server": "not counted: no tunnel process on this side"}
        out.append(t)
    return out


def test_rows_are_medians_per_case_and_side_with_the_notes() -> None:
    (client, server) = work_rows(_trials())
    assert client[1] == "client" and client[2]["syscalls_per_mb"] == 1100.0 and client[2]["read_per_mb"] == 121.0
    assert client[2]["packets_per_send"] is None and client[3] == ""
    assert server[1] == "server" and server[3] == "not counted: no tunnel process on this side"


def test_table_only_when_something_was_counted() -> None:
    page = work_table_html(_trials(), "r0")
    assert 'id="r0-work"' in page and "syscalls/MB" in page and "1,100" in page
    assert "packets/send" not in page  # a column nobody has is left out
    assert work_table_html([trial(1, "socat", 4e9)], "r0") == ""
    assert 'id="r0-work"' in run_page.render([run(_trials())])
