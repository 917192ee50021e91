"""The emulator's bottleneck queue occupancy (its stats file's `<wire>.occupancy`) as trial series: the
measured window only, on the trial's time base (t = seconds since the start of the measurement)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tunbench.link.emulator import link_metrics, queue_series
from tunbench.results import TrialRecord
from tunbench.trial.pair import Measured, account, series_span
from tunbench.workloads.base import Measurement

S = 1_000_000_000  # ns
EVERY = 100_000_000  # the emulator's window: 100 ms


def occupancy(start_ns: int, values: list[Any], *, truncated: bool = False, every: int = EVERY) -> dict[str, Any]:
    return {"start_ns": start_ns, "every_ns": every, "bytes": values, "truncated": truncated}


def stats(up: dict[str, Any] | None = None, down: dict[str, Any] | None = None) -> dict[str, Any]:
    a2b: dict[str, Any] = {"packets_in": 10, "delivered_bytes": 15000, "sojourn_us_p50": 2500}
    b2a: dict[str, Any] = {"packets_in": 4, "delivered_bytes": 6000}
    if up is not None:
        a2b["occupancy"] = up
    if down is not None:
        b2a["occupancy"] = down
    return {"version": 1, "specs": {"a2b": {"rate_bps": 20e6}, "b2a": {}}, "a2b": a2b, "b2a": b2a}


def test_only_the_windows_inside_the_measured_window_each_at_its_end() -> None:
    # window i covers [1 s + i * 100 ms, 1 s + (i + 1) * 100 ms); the measurement runs from 1.25 s to 2.0 s
    st = stats(up=occupancy(1 * S, [1000 * i for i in range(30)]))
    series, flags = queue_series(st, 1_250_000_000, 2 * S)
    # windows 3..9 (1.3-1.4 s ... 1.9-2.0 s): window 2 began before the measurement, window 10 ends after it
    assert [v for _, v in series["queue_bytes.up"]] == [3000.0, 4000.0, 5000.0, 6000.0, 7000.0, 8000.0, 9000.0]
    assert [t for t, _ in series["queue_bytes.up"]] == pytest.approx([0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75])
    # a direction without a bottleneck queue has no occupancy record, and no series
    assert set(series) == {"queue_bytes.up"} and flags == {}


def test_window_edges_that_meet_the_measurement_are_kept() -> None:
    st = stats(down=occupancy(10 * S, [7, 8, 9, 10, 11]))
    series, _ = queue_series(st, 10 * S + EVERY, 10 * S + 3 * EVERY)
    assert series["queue_bytes.down"] == [(pytest.approx(0.1), 8.0), (pytest.approx(0.2), 9.0)]
    # a record that begins after the measurement did: its windows keep their time since the measurement's start
    late, _ = queue_series(stats(up=occupancy(12 * S, [5, 6])), 11 * S, 13 * S)
    assert late["queue_bytes.up"] == [(pytest.approx(1.1), 5.0), (pytest.approx(1.2), 6.0)]
    assert queue_series(st, 20 * S, 21 * S) == ({}, {})  # a record that ended before the measurement


def test_a_record_the_emulator_truncated_is_flagged_where_it_stops_short() -> None:
    short = stats(up=occupancy(0, [1, 2, 3], truncated=True), down=occupancy(0, [4, 5, 6]))
    series, flags = queue_series(short, 0, S)  # the record covers 0.3 s of a 1 s measurement
    assert [v for _, v in series["queue_bytes.up"]] == [1.0, 2.0, 3.0]
    assert flags == {"link.up.queue_series_truncated": 1.0}  # down ended short but was not truncated: it is whole
    covered, flags = queue_series(short, 0, 2 * EVERY)  # truncated after the measured window ended
    assert len(covered["queue_bytes.up"]) == 2 and flags == {}


def test_malformed_records_and_values_are_left_out() -> None:
    bad = stats(up=occupancy(0, [1, 2], every=0), down={"start_ns": 0, "bytes": [1]})
    assert queue_series(bad, 0, S) == ({}, {})
    odd, _ = queue_series(stats(up=occupancy(0, [1, None, True, 4.0])), 0, S)
    assert odd["queue_bytes.up"] == [(pytest.approx(0.1), 1.0), (pytest.approx(0.4), 4.0)]
    assert queue_series(None, 0, S) == ({}, {})


def test_link_metrics_ignore_the_occupancy_record() -> None:
    st = stats(up=occupancy(0, [1, 2, 3], truncated=True), down=occupancy(0, [4]))
    m = link_metrics(st)
    assert m["link.up.delivered_bytes"] == 15000.0 and m["link.up.sojourn_us_p50"] == 2500.0
    assert not [k for k in m if "occupancy" in k or "truncated" in k]
    assert m == link_metrics(stats())


def test_the_series_span_is_the_workloads_own_then_its_measured_window_then_the_call() -> None:
    call = (100.0, 130.0)
    assert series_span(Measurement(), call) == call
    assert series_span(Measurement(window=(101.0, 111.0)), call) == (101.0, 111.0)
    assert series_span(Measurement(window=(101.0, 111.0), series_span=(105.0, 115.0)), call) == (105.0, 115.0)


def test_the_runner_puts_the_queue_on_the_workloads_time_base() -> None:
    """rrul's series count from its load's measured seconds (series_span), not from the workload's call."""
    rec = TrialRecord(1, "direct", "direct", "p", "rrul", 1, "bidir", repetition=1, params={})
    call = (1000.0, 1020.0)
    result = Measurement(metrics={"throughput_bps": 1e7}, series_span=(1004.0, 1014.0))
    window = Measured(result, SimpleNamespace(t0=1000.0, results={}, wall_s=20.0, cpus=[], placed={}), {}, call)  # type: ignore[arg-type]
    st = stats(up=occupancy(1003 * S, [100 * i for i in range(200)]))
    pair = SimpleNamespace(link_stats=lambda final: st, link_clock_offset_s=lambda: 0.0, underlay=lambda: None)
    account(
        SimpleNamespace(rec=rec, workload=SimpleNamespace(generator=None, derive=lambda metrics: {})),
        SimpleNamespace(pair=pair),
        window,
        final=True,
    )  # type: ignore[arg-type]
    pts = rec.series["queue_bytes.up"]
    # windows 10..109 of the record (1004.0-1004.1 s ... 1013.9-1014.0 s), at their ends since 1004 s
    assert len(pts) == 100 and pts[0] == (pytest.approx(0.1), 1000.0) and pts[-1] == (pytest.approx(10.0), 10900.0)
    assert rec.metrics["series_t0_s"] == pytest.approx(4.0)
    assert rec.metrics["link.up.delivered_bytes"] == 15000.0 and "queue_bytes.down" not in rec.series
