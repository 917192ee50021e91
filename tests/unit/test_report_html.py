"""HTML report structure (rendering in a real browser is tests/integration/test_report_html.py)."""

from __future__ import annotations

import json
import re

from tests.unit.report_data import demo_run, run, trial
from tunbench.report import html


def chart_ids(page: str) -> list[str]:
    return re.findall(r'<div id="([^"]+)" class="plotly-graph-div"', page)


def test_self_contained_with_plotly_embedded_once() -> None:
    page = html.render([demo_run()])
    assert page.startswith("<!DOCTYPE html>")
    assert "<script src=" not in page and "cdn.plot.ly" not in page.replace("https://cdn.plot.ly", "")
    assert page.count("Plotly.newPlot") == len(chart_ids(page))
    assert len(re.findall(r"plotly\.js v\d", page)) == 1  # the library's banner, once


def test_every_section_and_chart_of_a_full_run() -> None:
    page = html.render([demo_run(with_latency=True)])
    ids = chart_ids(page)
    assert len(ids) == len(set(ids))
    for suffix in ("throughput", "ratio", "cpu", "bits-per-cpu", "series-0", "series-1", "fairness", "flows"):
        assert f"r0-{suffix}" in ids
    assert "r0-latency" in ids
    for heading in ("Summary", "Throughput", "CPU cost", "Throughput over time", "Fairness", "Latency", "Provenance"):
        assert f">{heading}" in page
    assert "Test CPU" in page and "net.ipv4.tcp_wmem" in page and "WAN profiles" in page


def test_axes_have_titles_with_units() -> None:
    page = html.render([demo_run()])
    raw = re.findall(r'"yaxis":\{[^{}]*?"title":\{"text":"([^"]+)"', page)
    titles = [json.loads(f'"{t}"') for t in raw]
    assert "throughput (Gbit/s)" in titles
    assert "CPU (% of one core)" in titles and "Mbit per CPU-second" in titles
    assert "ratio to direct (×)" in titles and "Jain's fairness index" in titles


def test_optional_sections_are_left_out_without_data() -> None:
    page = html.render([run([trial(1, "socat", 1e9), trial(2, "socat", 1.1e9, repetition=2)])])
    ids = chart_ids(page)
    assert "r0-throughput" in ids
    assert not {"r0-ratio", "r0-latency", "r0-fairness", "r0-cpu"} & set(ids)
    assert "fairness does not apply" in page


def test_text_is_escaped() -> None:
    r = run([trial(1, "<img src=x onerror=alert(1)>", 1e9)])
    r.scenario_text = "</pre><script>alert(2)</script>"
    page = html.render([r])
    assert "<img src=x" not in page and "<script>alert(2)" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_multiple_runs_have_a_toc_and_distinct_ids() -> None:
    page = html.render([demo_run(rid=1, uid="tba", reps=3), demo_run(rid=2, uid="tbb", reps=3)])
    ids = chart_ids(page)
    assert len(ids) == len(set(ids)) and "r1-throughput" in ids
    assert 'href="#run-0-tba"' in page and 'href="#run-1-tbb"' in page


def test_stability_warnings_are_grouped() -> None:
    page = html.render([demo_run(reps=3)])
    assert "Stability warnings" in page and "too few repetitions for a significance test</b> in 6 case(s)" in page


def test_figure_data_is_valid_json() -> None:
    page = html.render([demo_run()])
    calls = re.findall(r'Plotly\.newPlot\(\s*"[^"]+",\s*(\[.*?\]),\s*(\{.*?\}),\s*\{"displaylogo"', page, flags=re.S)
    assert calls
    for data, layout in calls:
        assert json.loads(data) and "title" in json.loads(layout)
