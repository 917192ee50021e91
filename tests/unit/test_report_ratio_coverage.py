"""Markdown and HTML reports print the ratio-to-direct interval with its real coverage, never "95%"."""

from __future__ import annotations

import re

from tests.unit.report_data import demo_run
from tunbench.report.exporters import markdown
from tunbench.report.html import page as run_page

R = r"0\.0*[1-9]\d\d"  # a ratio below 1 with three significant digits


def test_markdown_ratio_interval_shows_its_coverage() -> None:
    text = markdown.render([demo_run(reps=3)])
    assert "vs direct [95% CI]" not in text
    assert "vs direct [CI] (coverage)" in text
    # 3 vs 3 repetitions: the widest interval covers 90 %, and that is what is printed (ratios with three
    # significant digits: 0.243, 0.0292)
    assert re.search(rf"{R}× \[{R}–{R}\] \(90%\)", text)
    five = markdown.render([demo_run(reps=5)])
    assert re.search(rf"× \[{R}–{R}\] \(96\.8%\)", five)


def test_html_ratio_interval_shows_its_coverage() -> None:
    page = run_page.render([demo_run(reps=3)])
    assert "bootstrap 95% CI" not in page
    assert re.search(rf"× \[{R}–{R}\] \(90% coverage\)", page)
