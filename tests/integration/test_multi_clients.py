"""Many clients, for real: a 20-client `clients` trial (MP-style) and 50-client storms (C-style) through
wireguard-go and OpenVPN, each in its own namespace behind one switch. The hermetic fixture checks that
nothing is left behind and the root namespace is untouched."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.integration.helpers import run_json


def scenario(tmp_path: Path, text: str) -> str:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return str(path)


def series(db: Path, seq: int, name: str) -> list[tuple[float, float]]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "SELECT s.t_s, s.value FROM series s JOIN trials t ON t.id = s.trial_id WHERE t.seq = ? AND s.name = ?"
            " ORDER BY s.t_s",
            (seq, name),
        ).fetchall()
    finally:
        con.close()
    return [(float(a), float(b)) for a, b in rows]


def test_twenty_clients_share_one_server_fairly(tmp_path: Path) -> None:
    # 40 Mbit/s offered in all: well inside what 20 wireguard-go clients carry on 2 shared cores, so the
    # assertions below judge the workload's measurement, not the host's speed (at 4 Mbit/s each, a host
    # with 3-5% steal carried 56 of 80 Mbit/s through wireguard-go's 20 client processes, 29% lost)
    rate = 2e6
    path = scenario(
        tmp_path,
        f"""
[run]
tunnels = ["wireguard-go", "openvpn-udp"]
repeat = 1
direct = false
[workload]
kind = ["clients"]
duration_s = 3
omit_s = 1
[workload.clients]
clients = [20]
protocols = ["udp", "tcp"]
udp_rate_bps = {rate:.0f}
""",
    )
    res, doc = run_json(tmp_path, path, timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    assert doc is not None and len(doc["trials"]) == 2
    for t in doc["trials"]:
        assert t["status"] == "ok", t["error"]
        m = t["metrics"]
        assert t["clients"] == 20 and m["clients.connected"] == 20
        # UDP at a fixed rate per client: everyone gets it, over the trimmed common window
        assert m["clients.udp.aggregate_bps"] == pytest.approx(20 * rate, rel=0.1)
        assert m["clients.udp.per_client_bps_min"] > 0.8 * rate
        assert m["clients.udp.jain"] > 0.95
        assert m["clients.udp.window_s"] == pytest.approx(3.0, abs=0.3)
        assert m["clients.udp.loss_pct"] < 5
        assert m["clients.udp.failed_clients"] == 0
        # TCP: 20 flows through one CPU-bound userspace server are not fair (that is the finding), but
        # most clients move data and the aggregate is real
        per_client = [v for _, v in series(tmp_path / "r.db", t["seq"], "clients.tcp.per_client_bps")]
        failed = m["clients.tcp.failed_clients"]
        # a client whose iperf3 failed counts as one that received 0: every figure is over all 20 (a loaded
        # CI host has seen 3 of 20 fail to start their test through the CPU-bound server)
        assert len(per_client) == 20 and failed <= 4 and sum(v == 0 for v in per_client) >= failed
        assert sum(v > 0 for v in per_client) >= 10
        assert m["clients.tcp.aggregate_bps"] > 1e6
        assert 0 < m["clients.tcp.jain"] <= 1
        # the server's cost, in total and per connected client
        assert m["clients.udp.server_cpu_s"] > 0
        assert m["clients.server_cpu_s_per_client"] == pytest.approx(m["clients.udp.server_cpu_s"] / 20)
        assert m["clients.server_rss_connected_bytes"] >= m["clients.server_rss_base_bytes"] > 0
        assert m["clients.client_rss_bytes_mean"] > 1e6
        assert m["throughput_bps"] == m["clients.udp.aggregate_bps"]
        assert len(t["streams"]) == 20 and {s["stream"] for s in t["streams"]} == set(range(1, 21))
        curve = series(tmp_path / "r.db", t["seq"], "clients.udp.aggregate_bps")
        assert len(curve) >= 2 and all(v > 0.5 * 20 * rate for _, v in curve)
        assert series(tmp_path / "r.db", t["seq"], "cpu_pct.server")


def test_fifty_client_storms_get_every_tunnel_working(tmp_path: Path) -> None:
    path = scenario(
        tmp_path,
        """
[run]
tunnels = ["wireguard-go", "openvpn-udp", "openvpn-tcp"]
repeat = 1
direct = false
[workload]
kind = ["storm"]
[workload.storm]
clients = [50]
variants = ["connect", "reconnect"]
timeout_s = 45
""",
    )
    res, doc = run_json(tmp_path, path, timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    assert doc is not None and len(doc["trials"]) == 6
    for t in doc["trials"]:
        assert t["status"] == "ok", t["error"]
        m = t["metrics"]
        assert m["clients.success_ratio"] == 1.0, (t["label"], t["variant"], m.get("clients.failed_count"))
        assert 0 < m["clients.ready_p50_s"] <= m["clients.ready_p99_s"] <= m["clients.ready_max_s"] < 45
        assert m["clients.handshakes_per_s"] > 0 and m["clients.handshakes_per_s_peak"] >= 1
        assert m["clients.server_cpu_s"] > 0
        cdf = series(tmp_path / "r.db", t["seq"], "clients.ready_cdf")
        assert len(cdf) == 50 and cdf[-1][1] == 1.0
        if t["variant"] == "reconnect":
            assert m["clients.connect.success_ratio"] == 1.0


def test_overload_then_recovery(tmp_path: Path) -> None:
    path = scenario(
        tmp_path,
        """
[run]
tunnels = ["openvpn-udp"]
repeat = 1
direct = false
[workload]
kind = ["storm"]
[workload.storm]
clients = [50]
variants = ["overload"]
overload_cpu_pct = 1
overload_s = 4
timeout_s = 60
""",
    )
    res, doc = run_json(tmp_path, path, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    (t,) = doc["trials"]
    assert t["status"] == "ok", t["error"]
    m = t["metrics"]
    # at 1% of a core the server cannot finish 50 TLS handshakes in 4 s; once the cap lifts, all recover
    assert m["clients.ready_during_overload"] < 50
    assert m["clients.success_ratio"] == 1.0
    assert m["clients.recovery_s"] is not None and m["clients.recovery_s"] >= 0
    assert m["clients.ready_max_s"] > 4.0


def test_an_emulated_profile_is_one_bottleneck_shared_by_every_client(tmp_path: Path) -> None:
    """The emulator sits on the server's uplink: 5 clients offering 4 Mbit/s each through a 10 Mbit/s
    uplink share those 10 Mbit/s (on lan they all get their rate), and the queue drops the rest."""
    rate, uplink = 4e6, 10e6
    path = scenario(
        tmp_path,
        f"""
[run]
tunnels = ["wireguard-go"]
profiles = ["lan", "uplink:up.rate=10mbit,up.queue=64p,delay=5ms"]
repeat = 1
direct = false
[workload]
kind = ["clients"]
duration_s = 3
omit_s = 1
[workload.clients]
clients = [5]
protocols = ["udp"]
udp_rate_bps = {rate:.0f}
""",
    )
    res, doc = run_json(tmp_path, path, timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    trials = {t["profile"]: t for t in doc["trials"]}
    assert set(trials) == {"lan", "uplink"}
    for t in trials.values():
        assert t["status"] == "ok", t["error"]
        assert t["metrics"]["clients.connected"] == 5
    lan, wan = trials["lan"]["metrics"], trials["uplink"]["metrics"]
    assert lan["clients.udp.aggregate_bps"] == pytest.approx(5 * rate, rel=0.1)
    assert "link.up.packets_in" not in lan
    # 1200-byte datagrams become 1288-byte WireGuard packets on the wire: at most 10 Mbit/s x 1200/1288 of
    # payload fits; the emulator's own drops must be zero (queue drops are the bottleneck working)
    payload_share = 1200 / 1288
    assert 0.75 * uplink * payload_share < wan["clients.udp.aggregate_bps"] < 1.02 * uplink * payload_share
    assert wan["clients.udp.loss_pct"] > 30
    assert wan["link.up.dropped_queue"] > 0 and wan["link.up.dropped_emulator"] == 0
    assert wan["link.down.delivered_packets"] > 0  # the handshakes' and iperf3's replies came back through it
    assert wan["cpu.link.user_s"] + wan["cpu.link.sys_s"] > 0
    # host counters over the measured phase: the server's namespace, and the gateway's behind the emulator
    assert "counters.server.udp_rcvbuf_errors" in lan and not any(k.startswith("counters.gateway.") for k in lan)
    assert "counters.server.udp_rcvbuf_errors" in wan and "counters.gateway.udp_in_errors" in wan
