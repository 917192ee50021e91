"""The ratio to direct is printed with three significant digits wherever it is printed (the run's table, the
Markdown and HTML reports): with two decimals every L3 VPN on a fast veth pair read 0.01 or 0.02."""

from __future__ import annotations

import math
import re

import pytest
from rich.console import Console

from tests.unit.report_data import demo_run, trial
from tunbench.report.common import fmt_ratio
from tunbench.report.exporters import markdown
from tunbench.report.html.tables import summary_table as html_summary_table
from tunbench.report.summary import summarize_trials
from tunbench.report.terminal import summary_table
from tunbench.results import TrialRecord


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (0.012345, "0.0123"),
        (0.0196, "0.0196"),
        (0.93, "0.930"),
        (1.0, "1.00"),
        (1.054, "1.05"),
        (9.996, "10.0"),
        (12.34, "12.3"),
        (123.4, "123"),
        (1234.5, "1,230"),
        (0.0, "0"),
        (math.nan, "–"),
        (None, "–"),
    ],
)
def test_three_significant_digits(x: float | None, text: str) -> None:
    assert fmt_ratio(x) == text


def _two_vpns() -> list[TrialRecord]:
    out: list[TrialRecord] = []
    for rep in range(1, 6):
        out += [
            trial(3 * rep - 2, "direct", 40e9 + rep * 1e8, repetition=rep),
            trial(3 * rep - 1, "vpn-a", 0.52e9 + rep * 1e6, repetition=rep),
            trial(3 * rep, "vpn-b", 0.78e9 + rep * 1e6, repetition=rep),
        ]
    return out


def test_the_runs_table_tells_two_slow_vpns_apart() -> None:
    console = Console(width=200, record=True)
    console.print(summary_table(summarize_trials(_two_vpns())))
    text = console.export_text()
    a = next(line for line in text.splitlines() if "vpn-a" in line)
    b = next(line for line in text.splitlines() if "vpn-b" in line)
    assert "0.0130" in a and "0.0194" in b, text  # both 0.01 with two decimals


def test_the_reports_print_three_digits() -> None:
    md = markdown.render([demo_run()])
    assert re.search(r"\(0\.0\d{3}× direct\)", md), md
    assert re.search(r"0\.\d{3}× \[0\.\d{3}–0\.\d{3}\]", md), md
    run = demo_run()
    html = html_summary_table(summarize_trials(run.trials), run.trials)
    assert re.search(r"0\.\d{3}× \[0\.\d{3}–0\.\d{3}\]", html), html
