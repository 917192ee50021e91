"""HTML report structure (rendering in a real browser is tests/integration/test_report_html.py)."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from tests.unit.report_data import demo_run, run, trial
from tunbench.report.html import base, cost
from tunbench.report.html import page as run_page
from tunbench.results import TrialRecord


def chart_ids(page: str) -> list[str]:
    return re.findall(r'<div id="([^"]+)" class="plotly-graph-div"', page)


def test_self_contained_with_plotly_embedded_once() -> None:
    page = run_page.render([demo_run()])
    assert page.startswith("<!DOCTYPE html>")
    assert "<script src=" not in page and "cdn.plot.ly" not in page.replace("https://cdn.plot.ly", "")
    assert page.count("Plotly.newPlot") == len(chart_ids(page))
    assert len(re.findall(r"plotly\.js v\d", page)) == 1  # the library's banner, once


def test_every_section_and_chart_of_a_full_run() -> None:
    page = run_page.render([demo_run(with_latency=True)])
    ids = chart_ids(page)
    assert len(ids) == len(set(ids))
    for suffix in ("throughput", "ratio", "cpu", "bits-per-cpu", "series-0", "series-1", "fairness", "flows"):
        assert f"r0-{suffix}" in ids
    assert "r0-latency" in ids
    for heading in ("Summary", "Throughput", "CPU cost", "Throughput over time", "Fairness", "Latency", "Provenance"):
        assert f">{heading}" in page
    assert "Test CPU" in page and "net.ipv4.tcp_wmem" in page and "WAN profiles" in page


def test_axes_have_titles_with_units() -> None:
    page = run_page.render([demo_run()])
    raw = re.findall(r'"yaxis":\{[^{}]*?"title":\{"text":"([^"]+)"', page)
    titles = [json.loads(f'"{t}"') for t in raw]
    assert "throughput (Gbit/s), log scale" in titles  # the demo's direct is 10x its tunnels and more
    assert "CPU (% of one core)" in titles and "Mbit per CPU-second" in titles
    assert "ratio to direct (×), log scale" in titles and "Jain's fairness index" in titles


def test_optional_sections_are_left_out_without_data() -> None:
    page = run_page.render([run([trial(1, "socat", 1e9), trial(2, "socat", 1.1e9, repetition=2)])])
    ids = chart_ids(page)
    assert "r0-throughput" in ids
    assert not {"r0-ratio", "r0-latency", "r0-fairness", "r0-cpu"} & set(ids)
    assert "fairness does not apply" in page


def test_text_is_escaped() -> None:
    r = run([trial(1, "<img src=x onerror=alert(1)>", 1e9)])
    r.scenario_text = "</pre><script>alert(2)</script>"
    page = run_page.render([r])
    assert "<img src=x" not in page and "<script>alert(2)" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_multiple_runs_have_a_toc_and_distinct_ids() -> None:
    page = run_page.render([demo_run(rid=1, uid="tba", reps=3), demo_run(rid=2, uid="tbb", reps=3)])
    ids = chart_ids(page)
    assert len(ids) == len(set(ids)) and "r1-throughput" in ids
    assert 'href="#run-0-tba"' in page and 'href="#run-1-tbb"' in page


def test_stability_warnings_are_grouped() -> None:
    page = run_page.render([demo_run(reps=3)])
    assert "Stability warnings" in page and "too few repetitions for a significance test</b> in 6 case(s)" in page


def test_figure_data_is_valid_json() -> None:
    page = run_page.render([demo_run()])
    calls = re.findall(r'Plotly\.newPlot\(\s*"[^"]+",\s*(\[.*?\]),\s*(\{.*?\}),\s*\{"displaylogo"', page, flags=re.S)
    assert calls
    for data, layout in calls:
        assert json.loads(data) and "title" in json.loads(layout)


def _clients_trial(seq: int, label: str, n: int, rep: int, *, direction: str = "up", status: str = "ok") -> TrialRecord:
    extra: dict[str, float | None] = {
        "clients.udp.aggregate_bps": 2e6 * n,
        "clients.tcp.aggregate_bps": 5e8 - 1e6 * n,
        "clients.udp.server_cpu_pct": 0.5 * n,
        "clients.server_rss_bytes_per_client": 30e3,
        "clients.udp.server_cpu_s_per_client": 0.02,
    }
    t = trial(seq, label, 2e6 * n, direction=direction, repetition=rep, status=status, extra=extra)
    streams = [(i, direction, 2e6, None) for i in range(n)] if status == "ok" else []  # one per client
    return replace(t, workload="clients", clients=n, series={}, streams=streams)


def _storm_trial(seq: int, label: str, n: int, *, cdf: bool) -> TrialRecord:
    ready = [0.2 + 0.01 * i for i in range(n)]
    extra: dict[str, float | None] = {
        "clients.ready_p50_s": ready[n // 2],
        "clients.ready_p99_s": ready[-1],
        "clients.success_ratio": 0.9,
    }
    series = {"clients.ready_s_by_client": [(float(i + 1), r) for i, r in enumerate(ready)]}
    if cdf:
        series["clients.ready_cdf"] = [(r, (i + 1) / n) for i, r in enumerate(ready)]
    t = trial(seq, label, 0.0, direction="-", extra=extra)
    return replace(
        t,
        workload="storm",
        clients=n,
        variant="connect",
        series=series,
        streams=[(i + 1, "ready_s", r, None) for i, r in enumerate(ready)],
    )


MANY_CLIENT_IDS = {f"r0-clients-{s}" for s in ("udp", "tcp", "cpu", "rss", "cpu-per-client")} | {"r0-storm-cdf"}


def test_many_clients_section_for_clients_and_storm_trials() -> None:
    trials = [
        _clients_trial(i * 2 + rep, label, n, rep, direction=d)
        for i, (label, n, d) in enumerate(
            (lbl, n, d) for lbl in ("direct", "socat") for n in (5, 20) for d in ("up", "down")
        )
        for rep in (1, 2)
    ]
    trials.append(_clients_trial(100, "socat", 100, 1, status="failed"))
    trials += [_storm_trial(200, "socat", 10, cdf=True), _storm_trial(201, "direct", 10, cdf=False)]
    page = run_page.render([run(trials)])
    ids = set(chart_ids(page))
    assert ids >= MANY_CLIENT_IDS
    assert ">Many clients" in page and "socat · lan · clients · 100 clients · up: 1 of 1 repetition(s) failed" in page
    # the storm's own table, from StormWorkload.columns (as the terminal shows it): p99 0.29 s
    assert "storm (median of repetitions)" in page and '<th class="num">p99</th>' in page and ">0.29<" in page
    assert "<td>socat</td><td>connect</td><td>10</td>" in page  # variant, clients (one profile: no column)
    # Per-client rates and storm ready times are not parallel iperf3 flows: no fairness or per-flow charts.
    assert not {"r0-fairness", "r0-flows", "r0-throughput"} & ids
    # One line per tunnel and direction, x = client count, medians over the repetitions.
    data = re.search(r'Plotly\.newPlot\(\s*"r0-clients-udp",\s*(\[.*?\]),\s*\{', page, flags=re.S)
    assert data is not None
    lines = {d["name"]: d for d in json.loads(data.group(1))}
    assert set(lines) == {"direct · up", "direct · down", "socat · up", "socat · down"}
    assert lines["socat · up"]["x"] == [5, 20] and lines["socat · up"]["y"] == [10.0, 40.0]
    titles = [json.loads(f'"{t}"') for t in re.findall(r'"yaxis":\{[^{}]*?"title":\{"text":"([^"]+)"', page)]
    assert "aggregate UDP (Mbit/s)" in titles and "server RSS per client (KiB)" in titles


def test_many_clients_charts_are_the_ones_the_workload_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    """The report names no fleet workload's metrics: a fleet workload declaring its own scaling chart and
    ready-time series gets them plotted (issue 29)."""
    from tunbench import workloads
    from tunbench.workloads.base import ReadySeries, Scaling
    from tunbench.workloads.storm import StormWorkload

    class Swarm(StormWorkload):
        kind = "swarm"
        scaling = (Scaling("swarm.agg_bps", 1e6, "agg", "Swarm throughput", "swarm (Mbit/s)", ".3g"),)
        ready = ReadySeries("swarm.cdf", "swarm.by_client")

    monkeypatch.setitem(workloads.REGISTRY, "swarm", Swarm())
    trials = [
        replace(
            trial(i, label, 1e6, direction="-", extra={"swarm.agg_bps": 1e6 * n}),
            workload="swarm",
            clients=n,
            variant="connect",
            series={"swarm.by_client": [(1.0, 0.2), (2.0, 0.3)]},
        )
        for i, (label, n) in enumerate((("direct", 5), ("socat", 5), ("socat", 10)), start=1)
    ]
    ids = set(chart_ids(run_page.render([run(trials)])))
    assert {"r0-clients-agg", "r0-storm-cdf"} <= ids and not ids & MANY_CLIENT_IDS - {"r0-storm-cdf"}


def test_no_many_clients_section_for_a_plain_iperf3_run() -> None:
    page = run_page.render([demo_run(reps=3)])
    assert not MANY_CLIENT_IDS & set(chart_ids(page))
    assert "Many clients" not in page


def test_the_profiles_events_are_marked_on_the_series() -> None:
    import dataclasses

    from tests.unit.report_data import trial
    from tunbench.report.html.series import fig_timeseries, link_events

    t = trial(1, "wireguard-go", 1e8)
    t = dataclasses.replace(
        t,
        params={
            **t.params,
            "workload": {"omit_s": 1.0},
            "profile": {
                "name": "p",
                "events": [
                    {"at": "4s", "direction": "both", "outage": "3s"},
                    {"at": "7s", "direction": "up", "rate": "25mbit"},
                    {"at": "9500ms", "direction": "both", "rebind": "both"},
                    {"at": "bogus"},
                ],
            },
        },
    )
    assert link_events(t) == [(3.0, 6.0, "outage"), (6.0, 6.0, "change"), (8.5, 8.5, "rebind (both)")]
    fig = fig_timeseries([t], {"wireguard-go": "#123456"}, "up · 1 flow")
    assert len(fig.layout.shapes) == 3  # the outage's band, two lines
    assert [a.text for a in fig.layout.annotations if a.text in ("outage", "change", "rebind (both)")] == [
        "outage",
        "change",
        "rebind (both)",
    ]
    assert "link’s events" in fig.layout.title.text


def _spread_summaries(rates: dict[str, float]) -> tuple[list[object], dict[str, str]]:
    from tests.unit.report_data import samples
    from tunbench.report.summary import summarize_trials

    trials = [
        trial(k * 3 + i + 1, label, v, repetition=i + 1, cpu_client_s=None if label == "direct" else 1.0)
        for k, (label, bps) in enumerate(rates.items())
        for i, v in enumerate(samples(bps, 3, 0.02, seed=k + 1))
    ]
    summaries = summarize_trials(trials)
    return summaries, base.label_colors((s.case.label, s.tunnel) for s in summaries)  # type: ignore[return-value]


def test_bars_spanning_orders_of_magnitude_get_a_labelled_log_axis() -> None:
    # direct at 20 Gbit/s and VPNs at 0.3-0.8 (issue 30, part 4): on a linear axis the VPNs are a few pixels
    summaries, colors = _spread_summaries({"direct": 20e9, "socat": 4e9, "wg": 0.8e9, "ovpn": 0.3e9})
    fig = cost.fig_throughput(summaries, colors)  # type: ignore[arg-type]
    assert fig.layout.yaxis.type == "log"
    assert fig.layout.yaxis.title.text == "throughput (Gbit/s), log scale"
    assert list(fig.layout.yaxis.ticktext) == ["0.2", "0.5", "1", "2", "5", "10", "20"]
    ratio = cost.fig_ratio(summaries, colors)  # type: ignore[arg-type]
    assert ratio is not None and ratio.layout.yaxis.type == "log" and "0.02" in ratio.layout.yaxis.ticktext


def test_bars_of_one_order_of_magnitude_keep_a_linear_axis() -> None:
    summaries, colors = _spread_summaries({"socat": 4e9, "wg": 0.8e9})
    fig = cost.fig_throughput(summaries, colors)  # type: ignore[arg-type]
    assert fig.layout.yaxis.type != "log" and fig.layout.yaxis.title.text == "throughput (Gbit/s)"
