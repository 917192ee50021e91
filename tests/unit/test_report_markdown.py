"""Markdown export: JMUX-style tables per profile/direction, flow counts as columns, direct first."""

from __future__ import annotations

import re

from tests.unit.report_data import demo_run, run, trial
from tunbench.report.exporters import markdown


def tables(text: str) -> list[list[list[str]]]:
    """Every Markdown table as rows of cells (divider rows dropped)."""
    out: list[list[list[str]]] = []
    cur: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if not all(re.fullmatch(r"-+:?", c) for c in cells):
                cur.append(cells)
        elif cur:
            out.append(cur)
            cur = []
    return out


def test_overview_has_flow_columns_and_direct_baseline_first() -> None:
    text = markdown.render([demo_run()])
    overview = tables(text)[0]
    assert overview[0] == ["tunnel", "1 flow", "4 flows"]
    assert overview[1][0] == "direct (baseline)"
    assert [r[0] for r in overview[1:]] == ["direct (baseline)", "socat", "slow"]
    # the ratio to direct with three significant digits (0.0292, not 0.03)
    assert re.fullmatch(r"[\d.,]+ Gbit/s \(0\.2\d\d× direct\)", overview[2][1]), overview[2][1]
    assert re.fullmatch(r"[\d.,]+ Mbit/s \(0\.0[1-9]\d\d× direct\)", overview[3][1]), overview[3][1]


def test_every_table_is_rectangular_and_details_have_ci_and_cpu() -> None:
    text = markdown.render([demo_run()])
    for table in tables(text):
        assert len({len(r) for r in table}) == 1, table
    details = tables(text)[1]
    head = details[0]
    assert "CI of median (its coverage)" in head and "CPU client" in head
    socat = next(r for r in details if r[0] == "socat" and r[1] == "4")
    assert socat[head.index("CPU client")].endswith("%")
    assert re.fullmatch(r"0\.\d{3}", socat[head.index("Jain fairness")])


def test_sections_warnings_provenance_and_escaping() -> None:
    r = run([trial(1, "a|b", 1e9), trial(2, "a|b", 1.1e9, repetition=2)])
    text = markdown.render([r])
    assert "### lan — up (client → server) (iperf3)" in text
    assert "a\\|b" in text  # a pipe in a label does not break the table
    assert "#### Warnings" in text and "only 2 repetition(s)" in text
    assert "#### Provenance" in text and "iperf3 3.12" in text
    for table in tables(text):
        assert len({len(row) for row in table}) == 1


def test_failed_case_is_reported() -> None:
    r = run([trial(1, "socat", 0.0, status="failed"), trial(2, "direct", 1e9)])
    text = markdown.render([r])
    assert "failed" in text and "tunnel did not come up" in text
    assert "more detail" not in text  # first line of the error only
