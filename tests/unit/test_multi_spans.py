"""Trimming windows, per-client throughput, summaries and the iperf3 interval parser (pure)."""

from __future__ import annotations

import json

import pytest

from tunbench.errors import TrialError
from tunbench.stats import percentile
from tunbench.workloads import spans as W


def ivs(start: float, n: int, bps: float) -> list[W.Interval]:
    return [W.Interval(start + k, start + k + 1, bps / 8) for k in range(n)]


def test_common_window_trims_head_and_tail() -> None:
    spans = {1: (0.0, 10.0), 2: (0.5, 10.5), 3: (2.0, 12.0)}
    w = W.common_window(spans, warmup_s=1.0)
    assert w.start_s == 3.0 and w.end_s == 10.0
    assert W.common_window(spans, warmup_s=1.0, max_s=4.0).end_s == 7.0


def test_no_common_window_is_an_error() -> None:
    with pytest.raises(TrialError, match="no common window"):
        W.common_window({1: (0.0, 2.0), 2: (3.0, 5.0)}, warmup_s=0.0)
    with pytest.raises(TrialError):
        W.common_window({}, warmup_s=0.0)


def test_late_starter_does_not_skew_the_window_throughput() -> None:
    # client 1 runs alone for 5 s at 100 Mbit/s, then shares: both at 50 Mbit/s
    c1 = ivs(0, 5, 100e6) + ivs(5, 10, 50e6)
    c2 = ivs(5, 10, 50e6)
    w = W.common_window({1: (0, 15), 2: (5, 15)}, warmup_s=1.0)
    rates = [8 * W.bytes_in(c, w) / w.length_s for c in (c1, c2)]
    assert rates == pytest.approx([50e6, 50e6])
    # a naive whole-run average would have said 66.7 vs 50
    assert 8 * sum(i.bytes for i in c1) / 15 == pytest.approx(66.67e6, rel=1e-3)


def test_bytes_in_prorates_cut_intervals() -> None:
    c = ivs(0, 4, 8.0)  # 1 byte per second
    assert W.bytes_in(c, W.Span(0.5, 2.25)) == pytest.approx(1.75)


def test_per_second_aggregate_and_loss() -> None:
    a = [W.Interval(k, k + 1, 100, packets=10, lost=1) for k in range(5)]
    b = [W.Interval(k, k + 1, 300, packets=10, lost=0) for k in range(5)]
    w = W.Span(1.0, 4.0)
    agg = W.per_second({1: a, 2: b}, w)
    assert agg == [(1.0, 3200.0), (2.0, 3200.0), (3.0, 3200.0)]
    assert W.loss_in(a, w) == (3, 30)


def test_percentiles_and_distribution() -> None:
    xs = [1.0, 2.0, 3.0, 4.0]
    assert percentile(xs, 50) == 2.5 and percentile(xs, 0) == 1.0 and percentile(xs, 100) == 4.0
    assert percentile([], 50) is None
    d = W.distribution(xs)
    assert d["min"] == 1.0 and d["max"] == 4.0 and d["mean"] == 2.5
    assert W.distribution([])["p50"] is None


def test_ready_summaries() -> None:
    assert W.ready_cdf([0.3, 0.1], 4) == [(0.1, 0.25), (0.3, 0.5)]
    assert W.per_second_counts([0.1, 0.2, 2.5]) == [(1.0, 2.0), (2.0, 0.0), (3.0, 1.0)]
    assert W.per_second_counts([]) == []


def test_cpu_between_interpolates_a_cumulative_series() -> None:
    s = [(0.0, 0.0), (1.0, 0.5), (2.0, 1.5)]
    assert W.cpu_between(s, 0.5, 1.5) == pytest.approx(0.75)
    assert W.cpu_between(s, -1, 5) == pytest.approx(1.5)


def test_growth_ratio_flags_superlinear_cost() -> None:
    assert W.growth_ratio({5: 0.1, 100: 0.1}) == pytest.approx(1.0)
    assert W.growth_ratio({5: 0.1, 20: 0.12, 100: 0.3}) == pytest.approx(3.0)
    assert W.growth_ratio({5: 0.1}) is None and W.growth_ratio({5: 0.0, 10: 1.0}) is None


def _doc(receiver_intervals: list[dict[str, float]], *, server: bool) -> str:
    inner = {"intervals": [{"sum": s} for s in receiver_intervals], "end": {}}
    doc: dict[str, object] = {"start": {}, "intervals": [], "end": {"sum": {}}}
    if server:
        doc["server_output_json"] = inner
    else:
        doc["intervals"] = inner["intervals"]
    return json.dumps(doc)


def test_iperf3_intervals_from_the_receiver_side() -> None:
    text = _doc(
        [
            {"start": 0.0, "end": 1.0, "bytes": 1000, "packets": 10, "lost_packets": 2},
            {"start": 1.0, "end": 2.0, "bytes": 2000, "packets": 20, "lost_packets": 0},
        ],
        server=True,
    )
    out, _ = W.iperf3_intervals(text, receiver="server", offset_s=10.0)
    assert out == [W.Interval(10.0, 11.0, 1000.0, 10, 2), W.Interval(11.0, 12.0, 2000.0, 20, 0)]
    down = _doc([{"start": 0.0, "end": 1.0, "bytes": 5}], server=False)
    out2, _ = W.iperf3_intervals(down, receiver="client", offset_s=0.0)
    assert out2 == [W.Interval(0.0, 1.0, 5.0, None, None)]


def test_iperf3_errors_are_trial_errors() -> None:
    with pytest.raises(TrialError, match="no valid JSON"):
        W.iperf3_intervals("nope", receiver="server", offset_s=0)
    with pytest.raises(TrialError, match="unable to connect"):
        W.iperf3_intervals(json.dumps({"error": "unable to connect"}), receiver="server", offset_s=0)
    with pytest.raises(TrialError, match="server_output_json"):
        W.iperf3_intervals(_doc([], server=False), receiver="server", offset_s=0)


def test_intervals_are_anchored_at_the_exit_not_the_launch() -> None:
    # launched at 1.0 s, connecting took 2 s, the test lasted 5 s, the process exited at 8.02 s
    assert W.anchor(1.0, 8.02, 5.0) == pytest.approx(3.02)
    assert W.anchor(1.0, None, 5.0) == 1.0  # never seen exiting: the launch
    assert W.anchor(1.0, 5.5, 5.0) == 1.0  # never before the launch
    assert W.shift([W.Interval(0, 1, 5)], 2.5) == [W.Interval(2.5, 3.5, 5)]


def test_late_starters_are_split_off() -> None:
    kept, late = W.split_late({1: 0.0, 2: 0.1, 3: 0.2, 4: 30.0}, tolerance_s=1.5)
    assert kept == [1, 2, 3] and late == [4]
    assert W.split_late({}, 1.0) == ([], [])
