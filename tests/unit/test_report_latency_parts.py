"""The HTML report's loaded RTT taken apart (propagation, queue, host) and the bottleneck queue occupancy."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from tests.unit.report_data import run, trial
from tunbench.report.html import latency, series
from tunbench.report.html import page as run_page
from tunbench.results import TrialRecord


def chart_ids(page: str) -> list[str]:
    return re.findall(r'<div id="([^"]+)" class="plotly-graph-div"', page)


def rrul(seq: int, label: str, rep: int, idle: float, queue: float, loaded: float, **kw: object) -> TrialRecord:
    extra: dict[str, float | None] = {
        "latency.idle_p50_ms": idle,
        "latency.loaded_p50_ms": loaded,
        "latency.loaded_queue_ms": queue,
        "check.rtt.residual_ms": loaded - idle - queue,
        "check.rtt.ok": 1.0,
    }
    extra.update(kw.pop("extra", {}) or {})  # type: ignore[call-overload]
    t = trial(seq, label, 2e7, direction="bidir", repetition=rep, extra=extra, **kw)  # type: ignore[arg-type]
    return dataclasses.replace(t, workload="rrul")


def rrul_trials() -> list[TrialRecord]:
    return [
        # wireguard-go: 20 ms idle, ~50 ms of queue, a few ms of host
        rrul(1, "wireguard-go", 1, 20.0, 50.0, 74.0),
        rrul(2, "wireguard-go", 2, 20.4, 52.0, 75.0),
        rrul(3, "wireguard-go", 3, 20.2, 51.0, 80.0),
        rrul(4, "wireguard-go", 4, 99.0, 99.0, 999.0, status="failed"),  # a failed repetition is left out
        # direct: the queues' sojourn exceeds what the loaded RTT added (a negative residual)
        rrul(5, "direct", 1, 20.0, 56.0, 74.0),
        rrul(6, "direct", 2, 20.0, 55.0, 74.0, extra={"check.rtt.ok": 0.0}),
        # an rrul trial without the emulator's figures (a plain veth): no bar
        dataclasses.replace(
            trial(7, "socat", 2e7, direction="bidir", extra={"latency.loaded_p50_ms": 3.0}), workload="rrul"
        ),
    ]


def test_the_loaded_rtt_is_stacked_into_propagation_queue_and_host() -> None:
    fig = latency.fig_rtt_parts(rrul_trials(), {"direct": "#7f7f7f", "wireguard-go": "#1f77b4"})
    assert fig is not None and fig.layout.barmode == "relative"
    bars = {d.name: d for d in fig.data if d.type == "bar"}
    assert list(bars) == ["propagation (idle RTT)", "bottleneck queues", "host / residual"]
    x = bars["bottleneck queues"].x
    assert list(x[1]) == ["direct", "wireguard-go"]  # one bar per case with the figures; socat has none
    assert list(bars["propagation (idle RTT)"].y) == [20.0, 20.2]  # medians over the ok repetitions
    assert list(bars["bottleneck queues"].y) == [55.5, 51.0]
    # the residual's median: direct -1.5 ms, drawn below zero (not clipped); wireguard-go's 4.0 ms on top
    assert list(bars["host / residual"].y) == pytest.approx([-1.5, 4.0])
    assert [c[0] for c in bars["host / residual"].customdata] == [2, 3]  # the repetitions, in the hover
    notes = [c[1] for c in bars["host / residual"].customdata]
    assert "negative" in notes[0] and "1 of 2 within the tolerance" in notes[0]
    assert "negative" not in notes[1] and "3 of 3" in notes[1]
    assert "below zero" in fig.layout.title.text and [s.y0 for s in fig.layout.shapes] == [0.0]
    marker = next(d for d in fig.data if d.type == "scatter")
    assert list(marker.y) == [74.0, 75.0]  # the measured loaded RTT p50, median over the repetitions
    assert marker.customdata[1][1] == pytest.approx(75.2)  # what the parts' medians add up to: not quite 75


def test_a_residual_not_judged_says_so() -> None:
    t = rrul(1, "direct", 1, 20.0, 30.0, 55.0)
    del t.metrics["check.rtt.ok"]  # no bottleneck both ways: stored, not judged
    fig = latency.fig_rtt_parts([t], {"direct": "#7f7f7f"})
    assert fig is not None
    residual = next(d for d in fig.data if d.name == "host / residual")
    assert "not judged" in residual.customdata[0][1] and "below zero" not in fig.layout.title.text
    assert not fig.layout.shapes


def test_the_rtt_figure_is_in_the_page_only_with_the_figures() -> None:
    page = run_page.render([run(rrul_trials())])
    assert "r0-rtt-parts" in chart_ids(page) and ">Latency<" in page
    plain = run_page.render([run([trial(1, "socat", 1e9), trial(2, "socat", 1e9, repetition=2)])])
    assert "r0-rtt-parts" not in chart_ids(plain) and latency.fig_rtt_parts(rrul_trials()[-1:], {}) is None


def queue_trial(seq: int, label: str, rep: int, *, truncated: bool = False) -> TrialRecord:
    t = trial(seq, label, 2e7, direction="bidir", repetition=rep)
    series = {
        "throughput_bps.up": [(1.0, 1.9e7), (2.0, 2.0e7)],
        "throughput_bps.down": [(1.0, 1.8e7), (2.0, 1.9e7)],
        "queue_bytes.up": [(0.1 * i, 128 * 1024.0 * i) for i in range(1, 21)],  # up to 2.5 MiB
        "queue_bytes.down": [(0.1 * i, 4096.0) for i in range(1, 21)],
        "latency_loaded_ms": [(0.1, 70.0), (0.2, 75.0)],
    }
    if truncated:
        t.metrics["link.up.queue_series_truncated"] = 1.0
    return dataclasses.replace(t, series=series)


def test_queue_occupancy_has_its_own_chart_and_stays_out_of_the_throughput_one() -> None:
    trials = [queue_trial(1, "direct", 1), queue_trial(2, "wireguard-go", 1), queue_trial(3, "wireguard-go", 2)]
    page = run_page.render([run(trials)])
    ids = chart_ids(page)
    assert "r0-queue-0" in ids and "r0-series-0" in ids and ">Bottleneck queue occupancy<" in page
    data = re.search(r'Plotly\.newPlot\(\s*"r0-series-0",\s*(\[.*?\]),\s*\{', page, flags=re.S)
    assert data is not None
    rates = json.loads(data.group(1))
    assert len(rates) == 6  # two directions of three trials: throughput only
    assert max(v for d in rates for v in d["y"]) == pytest.approx(20.0)  # Mbit/s, not bytes of queue
    # the per-second chart drops a trial's other series itself, whoever calls it
    alone = series.fig_timeseries(trials[:1], {"direct": "#7f7f7f"}, "lan · bidir · 1 flow")
    assert sorted(d.name for d in alone.data) == ["direct rep 1 (down)", "direct rep 1 (up)"]


def test_the_queue_chart_has_a_row_per_direction_and_a_line_per_repetition() -> None:
    trials = [queue_trial(1, "direct", 1), queue_trial(2, "wireguard-go", 1, truncated=True)]
    trials.append(queue_trial(3, "wireguard-go", 2))
    trials.append(dataclasses.replace(trial(4, "socat", 1e7), series={"queue_bytes.up": []}))  # nothing to draw
    fig = series.fig_queue(trials, {"direct": "#7f7f7f", "wireguard-go": "#1f77b4"}, "lan · bidir · 1 flow")
    assert [a.text for a in fig.layout.annotations][:2] == ["up (client → server)", "down (server → client)"]
    assert len(fig.data) == 6  # 3 trials x 2 directions
    assert [d.showlegend for d in fig.data] == [True, False, True, False, False, False]  # one entry per tunnel
    up = [d for d in fig.data if d.yaxis == "y"]
    assert len(up) == 3 and max(up[0].y) == pytest.approx(2.5)  # MiB
    assert fig.layout.yaxis.title.text == "queue (MiB)"
    assert "100 ms interval" in fig.layout.title.text and "end before the measured window" in fig.layout.title.text
    assert "record ends early" in up[1].hovertemplate and "record ends early" not in up[0].hovertemplate
    assert list(fig.data[0].x)[:2] == pytest.approx([0.1, 0.2])


def test_one_direction_only() -> None:
    t = queue_trial(1, "direct", 1)
    t = dataclasses.replace(t, series={"queue_bytes.down": [(0.1, 500.0), (0.2, 700.0)]})
    fig = series.fig_queue([t], {"direct": "#7f7f7f"}, "g")
    assert [a.text for a in fig.layout.annotations][:1] == ["down (server → client)"] and len(fig.data) == 1
    assert fig.layout.yaxis.title.text == "queue (bytes)"


def test_events_are_placed_by_the_series_origin_when_it_is_stored() -> None:
    t = trial(1, "wireguard-go", 1e8)
    profile = {"name": "p", "events": [{"at": "7s", "direction": "both", "outage": "3s"}]}
    t = dataclasses.replace(t, params={**t.params, "workload": {"omit_s": 1.0}, "profile": profile})
    assert series.link_events(t) == [(6.0, 9.0, "outage")]  # stored before series_t0_s: --omit after the start
    t.metrics["series_t0_s"] = 4.5  # rrul: its load's measured seconds began 4.5 s into the workload
    assert series.link_events(t) == [(2.5, 5.5, "outage")]
