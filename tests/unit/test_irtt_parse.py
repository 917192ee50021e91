"""The irtt parser and the latency/rrul metrics, on real irtt outputs (tests/data/irtt-*.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunbench.errors import TrialError
from tunbench.stats import percentile
from tunbench.workloads import iperf3, irtt
from tunbench.workloads.rrul import phase_metrics

DATA = Path(__file__).parent.parent / "data"


def load(name: str) -> irtt.IrttResult:
    return irtt.parse((DATA / name).read_text())


def test_wan_50ms_rtt_is_100ms_and_one_way_50ms() -> None:
    r = load("irtt-wan-50ms.json")
    assert r.packets_sent == 30 and r.packets_received == 30 and r.loss == 0.0
    assert len(r.rtt_ms) == 30
    m = irtt.rtt_metrics(r)
    p50, p90, p99, mx = (m[f"latency.{k}"] for k in ("p50_ms", "p90_ms", "p99_ms", "max_ms"))
    assert p50 is not None and p90 is not None and p99 is not None and mx is not None
    assert 100.0 <= p50 <= 101.0
    assert p50 <= p90 <= p99 <= mx
    assert m["latency.min_ms"] is not None and m["latency.min_ms"] >= 100.0  # the emulator never delivers early
    send, recv = m["latency.send_p50_ms"], m["latency.receive_p50_ms"]
    assert send is not None and recv is not None
    assert 50.0 <= send <= 51.0 and 50.0 <= recv <= 51.0
    # the series: time since the first send, in order, one point per reply
    ts = [t for t, _ in irtt.rtt_series(r)]
    assert ts[0] == 0.0 and ts == sorted(ts) and 0.25 < ts[-1] < 0.35


def test_lost_packets_are_counted_and_excluded() -> None:
    r = load("irtt-loss10-delay5ms.json")
    doc = json.loads((DATA / "irtt-loss10-delay5ms.json").read_text())
    lost = sum(1 for rt in doc["round_trips"] if rt["lost"] != "false")
    assert lost > 0
    assert len(r.rtt_ms) == len(doc["round_trips"]) - lost
    assert r.loss == pytest.approx(lost / len(doc["round_trips"]))
    assert r.extra["upstream_loss"] > 0 and r.extra["downstream_loss"] > 0
    assert all(9.5 < v < 20 for v in r.rtt_ms)  # 2 x 5 ms


def test_percentile_interpolates() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0], 99) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([4.0, 1.0, 3.0, 2.0], 100) == 4.0
    assert percentile([1.0, 2.0], 0) == 1.0


@pytest.mark.parametrize("text", ["", "not json", "{}", '{"stats": {}}'])
def test_bad_output_is_a_trial_error(text: str) -> None:
    with pytest.raises(TrialError):
        irtt.parse(text)


def test_argv() -> None:
    argv = irtt.client_argv("198.19.0.1", 2.5, Path("/tmp/x.json"))
    assert argv[:2] == ["irtt", "client"]
    assert argv[argv.index("-i") + 1] == "10ms" and argv[argv.index("-d") + 1] == "2.500s"
    assert argv[-1] == "198.19.0.1:2112"
    assert irtt.client_argv("2001:2::2", 1, Path("/x.json"))[-1] == "[2001:2::2]:2112"
    assert irtt.server_argv()[:4] == ["irtt", "server", "-b", ":2112"]


def test_rrul_phase_metrics() -> None:
    idle = load("irtt-loss10-delay5ms.json")  # ~10 ms
    loaded = load("irtt-wan-50ms.json")  # ~100 ms: "the load added 90 ms"
    load_res = iperf3.parse((DATA / "iperf3-rrul-bidir-wireguard-go.json").read_text(), "bidir")
    m = phase_metrics(idle, loaded, idle, load_res)
    assert m["latency.after_p50_ms"] == m["latency.idle_p50_ms"]
    inc50, inc99 = m["latency.increase_p50_ms"], m["latency.increase_p99_ms"]
    assert inc50 is not None and 85 < inc50 < 95
    assert inc99 is not None
    assert m["latency.loaded_p50_ms"] == percentile(loaded.rtt_ms, 50)
    up, down, total = m["throughput_bps.up"], m["throughput_bps.down"], m["throughput_bps"]
    assert up and down and total == pytest.approx(up + down)
