"""IPv6: tunnels over the 2001:2::/48 underlay (`--ip 6`), IPv6 inside an L3 tunnel (`--overlay 6`), the
latency and UDP workloads over IPv6, the WAN emulator's delay, loss and rate on IPv6 traffic, and the clear
refusal of an adapter that declares no IPv6."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.helpers import run_json, tunbench
from tunbench.link.binary import link_binary_or_none

SHORT = ("--duration", "1", "--omit", "0", "--repeat", "1", "--direction", "up")


def _ok(doc: dict) -> dict[str, dict]:
    trials = {f"{t['label']}/{t['workload']}/{t['profile']}": t for t in doc["trials"]}
    bad = {k: t["error"] for k, t in trials.items() if t["status"] != "ok"}
    assert not bad, bad
    return trials


def test_tunnels_over_ipv6_underlay(tmp_path: Path) -> None:
    res, doc = run_json(tmp_path, "-t", "wireguard-go,openvpn-udp,socat", "--ip", "6", *SHORT)
    assert res.returncode == 0, res.stdout + res.stderr
    trials = _ok(doc)
    assert len(trials) == 4
    for key, t in trials.items():
        assert t["params"]["ip"]["underlay"] == "ipv6", key
        assert t["metrics"]["throughput_bps"] > 1e6, key
    # direct is the link itself: its traffic is IPv6; wireguard-go and openvpn carry IPv4 inside (the overlay)
    assert trials["direct/iperf3/lan"]["params"]["ip"]["target"] == "ipv6"
    assert trials["wireguard-go/iperf3/lan"]["params"]["ip"] == {
        "underlay": "ipv6",
        "overlay": "ipv4",
        "target": "ipv4",
    }
    assert trials["socat/iperf3/lan"]["params"]["ip"]["overlay"] is None  # an L4 proxy has no inner network


def test_ipv6_overlay_in_wireguard_go_with_latency_and_udp(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        '[run]\ntunnels = ["wireguard-go"]\nrepeat = 1\ndirect = false\n'
        '[workload]\nkind = ["iperf3", "latency", "udp"]\nduration_s = 1\nomit_s = 0\n'
        '[workload.udp]\nrate = "50mbit"\n'
        '[topology]\nunderlay = "ipv6"\noverlay = "ipv6"\n'
    )
    res, doc = run_json(tmp_path, str(scenario))
    assert res.returncode == 0, res.stdout + res.stderr
    trials = _ok(doc)
    for t in trials.values():
        assert t["params"]["ip"] == {"underlay": "ipv6", "overlay": "ipv6", "target": "ipv6"}
    assert trials["wireguard-go/iperf3/lan"]["metrics"]["throughput_bps"] > 1e6
    lat = trials["wireguard-go/latency/lan"]["metrics"]
    assert lat["latency.packets_sent"] >= 50 and lat["latency.loss"] < 0.05 and 0 < lat["latency.p50_ms"] < 20
    udp = trials["wireguard-go/udp/lan"]["metrics"]
    assert 40e6 < udp["udp.sent_bps"] < 60e6 and udp["udp.loss"] < 0.5


@pytest.mark.skipif(link_binary_or_none() is None, reason="tunbench-link not built (make build)")
def test_emulator_delays_drops_and_limits_ipv6(tmp_path: Path) -> None:
    res, doc = run_json(
        tmp_path,
        "-t",
        "direct",
        "--ip",
        "6",
        "-w",
        "latency,iperf3",
        "--profile",
        "v6loss:delay=20ms,loss=5%",
        "--profile",
        "v6rate:rate=20mbit",
        "--duration",
        "3",
        "--omit",
        "1",
        "--repeat",
        "1",
        "--direction",
        "up",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    trials = _ok(doc)
    assert all(t["params"]["ip"]["target"] == "ipv6" for t in trials.values())
    lat = trials["direct/latency/v6loss"]["metrics"]
    assert 40 <= lat["latency.p50_ms"] < 45  # 2 x 20 ms, never early
    assert 0.03 < lat["latency.loss"] < 0.2  # 5% each way: ~9.75% of round trips
    # the emulator's own counters: it saw the IPv6 packets and dropped ~5% of them
    sent, lost = lat["link.up.packets_in"], lat["link.up.dropped_loss"]
    assert sent >= 250 and 0.01 < lost / sent < 0.1
    bulk = trials["direct/iperf3/v6rate"]["metrics"]
    # TCP over IPv6 at 1500 bytes: 1428 of every 1500 bytes are payload (95.2% of the IP rate)
    assert 0.85 * 20e6 < bulk["throughput_bps"] <= 20e6
    assert bulk["link.up.bytes_in"] > 0


def test_adapter_without_ipv6_is_refused_before_anything_starts(tmp_path: Path) -> None:
    res = tunbench("run", "--db", str(tmp_path / "r.db"), "-t", "ipip", "--ip", "6", "--no-direct")
    assert res.returncode == 2, res.stdout + res.stderr
    out = " ".join((res.stdout + res.stderr).split())
    assert "nothing to run" in out and "ipip × iperf3: the adapter does not declare an IPv6 underlay" in out
