"""The agent's window on its host (remote/hostwatch.py), its pure parts: the control connection's counters
and their share of the underlay device, and a window's figures from two edges."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tunbench.errors import TunbenchError
from tunbench.host import ledger as ledger_mod
from tunbench.monitor.interference import Edge
from tunbench.remote.agent import Agent
from tunbench.remote.hostwatch import HostEdge, control_overhead, figures, net_deltas, parse_tcp_info

SS = (
    "0      0        192.0.2.1:22      192.0.2.9:51234\n"
    "\t cubic wscale:7,7 rto:204 rtt:0.12/0.05 ato:40 mss:1448 pmtu:1500 rcvmss:536 advmss:1448 cwnd:10 "
    "bytes_sent:52012 bytes_acked:52012 bytes_received:8120 segs_out:211 segs_in:190 data_segs_out:120 "
    "data_segs_in:80 send 965Mbps lastsnd:4 lastrcv:4 lastack:4 pacing_rate 1.93Gbps delivered:121\n"
)


def test_tcp_info_fields_from_ss() -> None:
    assert parse_tcp_info(SS) == {"bytes_acked": 52012, "bytes_received": 8120, "segs_out": 211, "segs_in": 190}
    assert parse_tcp_info("") == {}


def test_the_control_connections_traffic_is_payload_plus_a_header_per_segment() -> None:
    a = {"bytes_acked": 1000, "bytes_received": 500, "segs_out": 10, "segs_in": 8}
    b = {"bytes_acked": 3000, "bytes_received": 900, "segs_out": 14, "segs_in": 12}
    assert control_overhead(a, b, 4) == {
        "tx_bytes": 2000 + 4 * 66,
        "rx_bytes": 400 + 4 * 66,
        "tx_packets": 4,
        "rx_packets": 4,
    }
    assert control_overhead(a, b, 6)["tx_bytes"] == 2000 + 4 * 86
    assert control_overhead({}, b, 4) == {}


def _snap(rx: int, tx: int, rcvbuf: int = 0) -> tuple[dict[tuple[str, str], int], dict[str, dict[str, int]]]:
    fields = dict.fromkeys(
        ("rx_dropped", "tx_dropped", "rx_errors", "tx_errors", "rx_fifo", "tx_fifo", "rx_packets", "tx_packets"), 0
    )
    return {("Udp", "RcvbufErrors"): rcvbuf}, {"eth0": {**fields, "rx_bytes": rx, "tx_bytes": tx}, "lo": {**fields}}


def test_the_device_deltas_lose_the_control_connections_share() -> None:
    snmp, dev = net_deltas(_snap(100, 200, 1), _snap(10_100, 50_200, 4), "eth0", {"rx_bytes": 300.0, "tx_bytes": 700.0})
    assert snmp == {"udp_rcvbuf_errors": 3.0}
    assert dev["rx_bytes"] == 9_700.0 and dev["tx_bytes"] == 49_300.0
    _, dev = net_deltas(_snap(0, 0), _snap(10, 10), "eth0", {"rx_bytes": 300.0})
    assert dev["rx_bytes"] == 0.0  # never below zero
    assert net_deltas(_snap(0, 0), _snap(1, 1), "ens9", {}) == ({"udp_rcvbuf_errors": 0.0}, {})


def _edge(woke: float, foreign_s: float, agent_s: float, steal: float, rx: int) -> HostEdge:
    e = Edge(woke, 0.0, {1}, agent_s, {77: ("sh", foreign_s, foreign_s)})
    cpu = {"user": 10.0 * woke, "nice": 0.0, "system": 0.0, "idle": 10.0 * woke, "iowait": 0.0, "irq": 0.0}
    return HostEdge(woke, 0.02, e, {**cpu, "softirq": 0.0, "steal": steal}, _snap(rx, 0), {})


def test_a_windows_figures_on_a_host() -> None:
    a, b = _edge(100.0, 1.0, 0.5, 0.0, 0), _edge(102.0, 2.8, 0.52, 2.0, 4096)
    out = figures(a, b, (99.999, 101.998), "eth0", 4, "lo")
    assert out["foreign_cpu_pct"] == pytest.approx(90.0)
    assert out["top"] == [("sh", 90.0)]
    assert out["agent_cpu_pct"] == pytest.approx(1.0)
    assert out["steal_pct"] == pytest.approx(100 * 2.0 / 42.0)
    assert out["late_s"] == pytest.approx([0.001, 0.002])
    assert out["net"]["dev"]["rx_bytes"] == 4096.0
    assert out["net"]["control"]["subtracted"] is False  # on lo, not the underlay
    assert "net" not in figures(a, b, (100.0, 102.0), None)


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Agent]:
    monkeypatch.setattr(ledger_mod, "STATE_DIR", tmp_path / "state")
    with contextlib.ExitStack() as stack:
        a = Agent(ledger_mod.Ledger.open("tbtest03"), stack)
        stack.callback(a.close)
        yield a


@pytest.mark.skipif(os.geteuid() != 0, reason="reads every process's CPU")
def test_the_agent_reads_a_window_at_the_instants_it_is_given(agent: Agent) -> None:
    """The agent in this process: each edge read when its instant came (not before), and the bytes sent on
    the device holding the address in between counted."""
    start_at = time.monotonic() + 0.05
    key = agent.op_watch_start(at=start_at, exclude=[], address="127.0.0.1")
    time.sleep(0.1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _ in range(100):
            s.sendto(b"x" * 1000, ("127.0.0.1", 9))
    fig = agent.op_watch_stop(watch=key, at=time.monotonic() + 0.05)
    assert all(0.0 <= late < 0.5 for late in fig["late_s"]), fig["late_s"]
    assert fig["wall_s"] >= 0.1
    assert fig["net"]["device"] == "lo" and fig["net"]["dev"]["tx_bytes"] >= 100 * 1000
    assert fig["foreign_cpu_pct"] >= 0.0 and fig["steal_pct"] is not None
    with pytest.raises(TunbenchError, match="no watch"):
        agent.op_watch_stop(watch=key, at=0.0)
