"""rrul's load start: one iperf3 --bidir (all flows on one signal) or, as Flent's netperf flows start, one
iperf3 per direction with the download's started later; summary = "flent" picks the latter."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tunbench.workloads import iperf3
from tunbench.workloads.rrul import RrulOptions, load_processes, merge_directions


def test_flent_summary_starts_as_flent_unless_told() -> None:
    assert RrulOptions().start == "together"
    flent = RrulOptions.model_validate({"summary": "flent"})
    assert (flent.start, flent.idle_s, flent.down_lag_ms) == ("flent", 5.0, 50.0)
    mine = RrulOptions.model_validate({"summary": "flent", "start": "together", "idle_s": 2})
    assert (mine.start, mine.idle_s) == ("together", 2.0)
    with pytest.raises(ValidationError):
        RrulOptions.model_validate({"start": "staggered"})


def test_together_is_one_bidir_client() -> None:
    (p,) = load_processes(4, 30, 0, RrulOptions())
    assert (p.params.direction, p.params.flows, p.params.duration_s, p.port_offset, p.lag_s) == ("bidir", 4, 31, 0, 0)


def test_flent_start_is_upload_then_download_to_own_servers() -> None:
    up, down = load_processes(4, 30, 1.2, RrulOptions(start="flent", down_lag_ms=80))
    assert (up.params.direction, up.port_offset, up.lag_s) == ("up", 0, 0.0)
    assert (down.params.direction, down.port_offset, down.lag_s) == ("down", 1, pytest.approx(0.08))
    assert up.params.flows == down.params.flows == 4
    assert up.params.omit_s == down.params.omit_s == 2
    assert up.json_name != down.json_name
    assert "-R" in iperf3.client_argv("198.18.0.2", 5202, down.params)
    assert "--bidir" not in iperf3.client_argv("198.18.0.2", 5201, up.params)


def _res(direction: str, bps: float, points: list[float]) -> iperf3.Iperf3Result:
    return iperf3.Iperf3Result(
        throughput_bps=bps,
        up_bps=bps if direction == "up" else None,
        down_bps=bps if direction == "down" else None,
        retransmits=3,
        duration_s=31.0,
        intervals=[iperf3.IntervalPoint(t, v, direction) for t, v in enumerate(points, start=1)],
    )


def test_merge_directions_keeps_each_direction_series() -> None:
    r = merge_directions([_res("up", 18e6, [17e6, 19e6]), _res("down", 19e6, [18e6, 20e6])])
    assert (r.up_bps, r.down_bps, r.throughput_bps, r.retransmits) == (18e6, 19e6, 37e6, 6)
    assert [(p.direction, p.bps) for p in r.intervals] == [("up", 17e6), ("up", 19e6), ("down", 18e6), ("down", 20e6)]
    one = _res("up", 1e6, [1e6])
    assert merge_directions([one]) is one
