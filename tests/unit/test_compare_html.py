"""`tunbench compare A B --html` (report/html/compare.py) and the checks behind its flamegraphs
(report/flamediff.py): one sampling rate on both sides, unnamed roots, SVGs made inert for inlining."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.unit.report_data import run, trial
from tests.unit.test_flamediff import ab_store
from tunbench.cli import app
from tunbench.perf.flamegraph import find_tool
from tunbench.report.compare import compare_runs
from tunbench.report.flamediff import Diff, name_unnamed, same_rate, sample_period_ns
from tunbench.report.html.compare import inline_svg, render_comparison
from tunbench.results import TrialRecord

P999 = 1_001_001  # perf's cpu-clock period at 999 Hz, in ns
P499 = 2_004_008  # ... at 499 Hz


def _stacks(period: int, *counts: int) -> str:
    return "".join(f"main;f{i} {n * period}\n" for i, n in enumerate(counts))


def test_the_sampling_period_is_the_gcd_of_a_trials_weights() -> None:
    assert sample_period_ns(_stacks(P999, 3, 1, 40)) == P999
    assert sample_period_ns(_stacks(P499, 7, 2)) == P499
    assert sample_period_ns("main;f 900\nmain;g 100\n") is None  # below perf's 10 µs floor: not whole periods
    assert sample_period_ns("") is None


def test_same_rate_accepts_one_rate_and_names_it() -> None:
    ok, text = same_rate([_stacks(P999, 3, 1), _stacks(P999, 5, 2)], [_stacks(P999, 9, 1)])
    assert ok and text == "sampled at 999 Hz on both sides"


def test_same_rate_refuses_two_rates_and_says_which() -> None:
    ok, text = same_rate([_stacks(P999, 3, 1)], [_stacks(P499, 5, 2)])
    assert not ok
    assert text.startswith("refused:") and "A at 999 Hz" in text and "B at 499 Hz" in text
    ok, text = same_rate([_stacks(P999, 3, 1), _stacks(P499, 2, 1)], [_stacks(P999, 5, 2)])
    assert not ok and "A at 999 Hz, 499 Hz" in text  # two rates within one side are refused too


def test_same_rate_warns_when_the_rate_cannot_be_told() -> None:
    ok, text = same_rate(["main;f 900\nmain;g 100\n"], [_stacks(P999, 5, 2)])
    assert ok and text.startswith("warning: the sampling rate cannot be told")


def test_unnamed_roots_take_the_tunnels_name() -> None:
    folded = ":21720;read;sys_read 30\nsocat;write 5\n:9;x 1\n"
    assert name_unnamed(folded, "socat") == "socat;read;sys_read 30\nsocat;write 5\nsocat;x 1\n"


SVG = (
    '<?xml version="1.0" standalone="no"?><svg version="1.1" width="1200" height="80" onload="init(evt)" '
    'viewBox="0 0 1200 80" xmlns="http://www.w3.org/2000/svg" xmlns:fg="http://github.com/jonhoo/inferno">'
    '<defs><linearGradient id="background"><stop offset="5%"/></linearGradient></defs>'
    "<style>#title { font-size:17px } #frames > *:hover { stroke:black }</style>"
    '<script type="text/ecmascript"><![CDATA[function init(evt) {}]]></script>'
    '<rect width="100%" height="100%" fill="url(#background)"/><text id="title">t</text>'
    '<text id="search" onclick="search_prompt()">Search</text><text id="details"> </text>'
    '<svg id="frames" x="10" width="1180"><g><title>send (5 ns, 50%; +10.00%)</title>'
    '<rect x="0%" width="50%" fg:w="5"/></g></svg></svg>'
)


def test_inline_svg_is_inert_and_its_ids_are_its_own() -> None:
    out = inline_svg(SVG, "case-0-fg-client")
    assert "<script" not in out and "init(" not in out and "onload" not in out and "onclick" not in out
    assert "Search" not in out and 'id="case-0-fg-client-details"' not in out  # the script's controls are gone
    ids = re.findall(r'id="([^"]+)"', out)
    assert sorted(ids) == ["case-0-fg-client-background", "case-0-fg-client-frames", "case-0-fg-client-title"]
    assert "url(#case-0-fg-client-background)" in out
    # its style sheet too (escaped: inside <svg>, HTML parses <style> as text with character references)
    assert "#case-0-fg-client-title {" in out and "#case-0-fg-client-frames &gt; *:hover" in out
    assert "<title>send (5 ns, 50%; +10.00%)</title>" in out  # hovering a frame still tells its figures
    assert 'class="flamegraph"' in out and 'width="1200"' not in out and 'viewBox="0 0 1200 80"' in out


def _work_trial(seq: int, label: str, rep: int, syscalls_per_mb: float) -> TrialRecord:
    return trial(
        seq, label, 4e9 if label == "a" else 3e9, repetition=rep, cpu_client_s=1.0,
        extra={"work.client.syscalls_per_mb": syscalls_per_mb, "work.client.packets_per_send": 1.0},
    )  # fmt: skip


def _paired_result():  # type: ignore[no-untyped-def]
    trials = [
        _work_trial(i * 2 + k + 1, label, i + 1, (1000.0 if label == "a" else 4000.0) + 10 * i)
        for i in range(4)
        for k, label in enumerate(("a", "b"))
    ]
    r = run(trials)
    return compare_runs(r, r, label_a="a", label_b="b")


def test_page_puts_verdicts_counted_work_and_flamegraph_in_one_case_section() -> None:
    result = _paired_result()
    (row,) = {(r.case_a, r.case_b) for r in result.rows}
    diffs = [
        Diff(row[0], row[1], "client", SVG, rate="sampled at 999 Hz on both sides"),
        Diff(row[0], row[1], "server", None, "refused: the stacks were not sampled at one rate (A at 999 Hz)"),
    ]  # fmt: skip
    page = render_comparison(result, diffs)
    assert "<script" not in page.split("</head>")[1]  # no script in the body: the flamegraphs are inert
    (section,) = re.findall(r'<section class="case" id="case-0">.*?</section>', page, re.S)
    assert "a → b · lan · up · 1 flow" in section and 'class="badge bad">regressed<' in section
    verdicts = re.search(r'<table id="case-0-verdicts">.*?</table>', section, re.S)
    work = re.search(r'<table id="case-0-work">.*?</table>', section, re.S)
    assert verdicts is not None and "throughput" in verdicts.group(0) and "syscalls" not in verdicts.group(0)
    assert work is not None and "syscalls/MB client" in work.group(0) and "+2" in work.group(0)  # about +300%
    assert re.search(r"\[\+\d+\.\d, \+\d+\.\d\] 95%", work.group(0))  # the change's CI and its coverage
    assert '<figure id="case-0-fg-client">' in section and "sampled at 999 Hz on both sides" in section
    assert 'id="case-0-fg-client-frames"' in section
    assert "refused: the stacks were not sampled at one rate" in section  # the server side says why it has none
    assert section.index("case-0-verdicts") < section.index("case-0-fg-client")  # the verdicts, then beside them
    assert 'id="verdict">verdict: 3 regressed' in page  # throughput, and so CPU per bit (the tunnel's, its client's)
    # what gated and why sits with the verdict, not among the warnings; the wide tier is marked in the table
    head = page.split('id="verdict"')[1].split("</section>")[0]
    assert '<p class="meta">gate: CPU/bit tunnel (the tunnel&#x27;s CPU time per bit, both sides' in head
    assert "gate: " not in page.split('class="warnings"')[-1].split("</div>")[0]
    assert "throughput</td>" in verdicts.group(0) and 'slower <span class="note">(wide)</span>' in verdicts.group(0)


def test_page_without_stacks_says_how_to_record_them() -> None:
    page = render_comparison(_paired_result(), None)
    assert "record A and B with <code>tunbench run --flamegraph</code>" in page


@pytest.mark.skipif(find_tool("inferno-diff-folded") is None, reason="needs inferno (make tools)")
def test_cli_html_refuses_stacks_of_two_rates(tmp_path: Path) -> None:
    db = ab_store(tmp_path / "s.db", {"a": _stacks(P999, 9, 1), "b": _stacks(P499, 3, 7)})
    page = tmp_path / "cmp.html"
    res = CliRunner().invoke(
        app, ["compare", "1", "--label-a", "a", "--label-b", "b", "--db", str(db), "--html", str(page),
              "--flamegraph-diff", str(tmp_path / "fd")],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    text = page.read_text()
    assert "refused: the stacks were not sampled at one rate (A at 999 Hz; B at 499 Hz" in text
    assert "svg" not in text.split("<body>")[1].replace("svg.flamegraph", "")  # no flamegraph drawn
    out = " ".join(res.output.split())
    assert "a → b · lan · up · 1 flow client: refused" in out and "comparison page written to" in out
    assert not list((tmp_path / "fd").glob("*.svg"))


@pytest.mark.skipif(find_tool("inferno-diff-folded") is None, reason="needs inferno (make tools)")
def test_cli_html_embeds_the_diff_of_one_rate(tmp_path: Path) -> None:
    db = ab_store(tmp_path / "s.db", {"a": _stacks(P999, 9, 1), "b": _stacks(P999, 3, 7)})
    page = tmp_path / "cmp.html"
    res = CliRunner().invoke(
        app, ["compare", "1", "--label-a", "a", "--label-b", "b", "--db", str(db), "--html", str(page)]
    )
    assert res.exit_code == 0, res.output
    text = page.read_text()
    assert "sampled at 999 Hz on both sides" in text and 'class="flamegraph"' in text
    assert "main;f1" not in text and "f1 (" in text and "+60.00%" in text  # f1's share went from 10% to 70%
