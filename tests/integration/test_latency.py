"""Latency through real tunnels with real irtt: idle RTT percentiles, latency under load (rrul), the
emulated WAN's RTT, and the host counters recorded with every trial."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.integration.helpers import run_json
from tunbench.store.db import Store

pytestmark = pytest.mark.skipif(__import__("shutil").which("irtt") is None, reason="irtt is not installed")


def stored_series(tmp_path: Path, doc: Any, label: str, workload: str) -> dict[str, list[tuple[float, float]]]:
    """The JSON export leaves the series out: read them from the store."""
    with Store(tmp_path / "r.db") as store:
        (rec,) = [t for t in store.find_run(doc["run"]["uid"]).trials if t.label == label and t.workload == workload]
    return rec.series


def by_case(doc: Any) -> dict[tuple[str, str], dict[str, Any]]:
    return {(t["label"], t["workload"]): t for t in doc["trials"]}


def test_latency_and_rrul_through_wireguard_go(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        '[run]\ntunnels = ["wireguard-go"]\nrepeat = 1\n'
        '[workload]\nkind = ["latency", "rrul"]\nduration_s = 2\nomit_s = 1\n'
        "[workload.rrul]\nidle_s = 1.0\n"
    )
    res, doc = run_json(tmp_path, str(scenario))
    assert res.returncode == 0, res.stdout + res.stderr
    trials = by_case(doc)
    assert set(trials) == {(t, w) for t in ("direct", "wireguard-go") for w in ("latency", "rrul")}
    assert all(t["status"] == "ok" for t in trials.values()), [t["error"] for t in trials.values()]
    lat = {label: trials[(label, "latency")]["metrics"] for label in ("direct", "wireguard-go")}
    for m in lat.values():
        assert m["latency.p50_ms"] <= m["latency.p90_ms"] <= m["latency.p99_ms"] <= m["latency.max_ms"]
        assert m["latency.packets_sent"] >= 100  # 10 ms interval for 2 s
        assert m["latency.loss"] < 0.05
        assert m["latency.send_p50_ms"] > 0 and m["latency.receive_p50_ms"] > 0
    # encrypting in user space adds latency
    assert lat["wireguard-go"]["latency.p50_ms"] > lat["direct"]["latency.p50_ms"]
    series = stored_series(tmp_path, doc, "wireguard-go", "latency")["latency_ms"]
    assert len(series) >= 100 and all(rtt > 0 for _, rtt in series)

    wg = trials[("wireguard-go", "rrul")]["metrics"]
    # under load the tail grows (on lan the medians can tie within microseconds: a CI run saw 0.554 vs 0.563)
    assert wg["latency.loaded_p99_ms"] >= wg["latency.idle_p50_ms"]
    assert wg["latency.increase_p50_ms"] == pytest.approx(wg["latency.loaded_p50_ms"] - wg["latency.idle_p50_ms"])
    assert wg["throughput_bps.up"] > 1e6 and wg["throughput_bps.down"] > 1e6
    direct = trials[("direct", "rrul")]["metrics"]
    assert direct["latency.loaded_p99_ms"] >= direct["latency.idle_p50_ms"]
    # host counters, both namespaces, every trial
    for t in trials.values():
        for role in ("client", "server"):
            assert f"counters.{role}.udp_rcvbuf_errors" in t["metrics"]
            assert f"counters.{role}.tcp_retrans_segs" in t["metrics"]
    # the terminal: latency cases in their own tables, not in the throughput table
    assert "latency (median of repetitions)" in res.stdout and "rrul (median of repetitions)" in res.stdout
    assert "Mbit/CPU-s" not in res.stdout


def test_idle_rtt_through_direct_at_wan_50ms_is_100ms(tmp_path: Path) -> None:
    """The issue's bound, 100 ± 0.5 ms. The path itself (TUN devices, irtt in user space) takes ~0.26 ms of
    that budget, so the median needs enough probes (300 over 3 s) that a short burst of host noise on this
    shared VM cannot move it; a failure prints the emulator's own lateness to tell the two apart."""
    res, doc = run_json(
        tmp_path, "-t", "direct", "--profile", "wan-50ms", "-w", "latency", "--duration", "3", "--repeat", "1"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    (t,) = doc["trials"]
    assert t["status"] == "ok", t["error"]
    m = t["metrics"]
    late = {k: m.get(k) for k in ("link.up.late_us_p50", "link.up.late_us_p99", "link.down.late_us_p99")}
    assert m["latency.p50_ms"] == pytest.approx(100.0, abs=0.5), f"emulator lateness (µs): {late}"
    assert m["latency.send_p50_ms"] == pytest.approx(50.0, abs=0.5)
    assert m["latency.receive_p50_ms"] == pytest.approx(50.0, abs=0.5)
    assert m["latency.min_ms"] >= 100.0  # never early


def test_connect_distribution(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        '[run]\ntunnels = ["wireguard-go"]\nrepeat = 1\ndirect = false\n'
        '[workload]\nkind = ["connect"]\n[workload.connect]\ncount = 3\n'
    )
    res, doc = run_json(tmp_path, str(scenario))
    assert res.returncode == 0, res.stdout + res.stderr
    (t,) = doc["trials"]
    assert t["status"] == "ok", t["error"]
    m = t["metrics"]
    assert m["connect.count"] == 3 and m["connect.failures"] == 0
    assert 0 < m["connect.min_s"] <= m["connect.p50_s"] <= m["connect.p90_s"] <= m["connect.max_s"] < 20
    assert [i for i, _ in stored_series(tmp_path, doc, "wireguard-go", "connect")["connect_s"]] == [1, 2, 3]
    assert "connect (median of repetitions)" in res.stdout


@pytest.mark.skipif(__import__("shutil").which("netperf") is None, reason="netperf is not installed (make netperf)")
@pytest.mark.skipif(__import__("shutil").which("sockperf") is None, reason="sockperf is not installed (make deps)")
def test_request_response_and_connection_rate_through_wireguard_go_and_socat(tmp_path: Path) -> None:
    """rr (TCP_RR) and crr (TCP_CRR) with real netperf through direct, wireguard-go and socat (an L4 proxy:
    the data connection through it, the control connection over the underlay): their figures, the tunnel's
    CPU per transaction, and a measured window that holds the traffic (netperf's TCP_CRR exits seconds after
    its test: a window anchored at its exit would hold none of it). Then one udp-rr trial with sockperf through
    wireguard-go: its p99.9 above its p99, and no sockperf left running."""
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        '[run]\ntunnels = ["wireguard-go", "socat"]\nrepeat = 1\n'
        '[workload]\nkind = ["rr", "crr"]\nduration_s = 2\nomit_s = 0\n'
    )
    res, doc = run_json(tmp_path, str(scenario))
    assert res.returncode == 0, res.stdout + res.stderr
    trials = by_case(doc)
    assert set(trials) == {(t, w) for t in ("direct", "wireguard-go", "socat") for w in ("rr", "crr")}
    assert all(t["status"] == "ok" for t in trials.values()), [t["error"] for t in trials.values()]
    for (label, _), t in trials.items():
        m = t["metrics"]
        assert m["rr.transactions_per_s"] > 0 and m["rr.transactions"] > 0
        assert m["rr.latency_min_us"] <= m["rr.latency_p50_us"] <= m["rr.latency_p90_us"] <= m["rr.latency_p99_us"]
        assert m["rr.latency_p99_us"] <= m["rr.latency_max_us"]
        # the tunnel's CPU per transaction on each side; direct has no tunnel processes, socat none on the server
        assert (m.get("rr.cpu_us_per_tx.client") is None) == (label == "direct")
        assert (m.get("rr.cpu_us_per_tx.server") is None) == (label in ("direct", "socat"))
        # netperf's requests and responses crossed the client's loopback only through the proxy (netperf to
        # socat): each transaction there is at least a request and a response
        lo = m.get("counters.client.dev.lo.rx_packets") or 0.0
        assert (lo >= 2 * m["rr.transactions"]) == (label == "socat"), (label, lo, m["rr.transactions"])
    # a connection per transaction carries its handshake and teardown too: more packets, more of the
    # tunnel's CPU, per transaction than a request and its response on an open connection; socat also
    # forks a child per connection
    for label in ("wireguard-go", "socat"):
        per = {w: trials[(label, w)]["metrics"] for w in ("rr", "crr")}
        assert per["crr"]["rr.cpu_us_per_tx"] > per["rr"]["rr.cpu_us_per_tx"], label
    assert "rr (median of repetitions)" in res.stdout and "crr (median of repetitions)" in res.stdout

    # sockperf's ping-pong: one trial, -t 2 (its 400 ms warm-up and 50 ms cool-down left out: 1.55 s measured)
    (tmp_path / "sockperf").mkdir()
    scenario.write_text('[workload]\nkind = ["udp-rr"]\n[workload.udp-rr]\ngenerator = "sockperf"\n')
    flags = ("-t", "wireguard-go", "--no-direct", "--repeat", "1", "--duration", "1", "--omit", "0")
    res, doc = run_json(tmp_path / "sockperf", str(scenario), *flags)
    assert res.returncode == 0, res.stdout + res.stderr
    (t,) = doc["trials"]
    m = t["metrics"]
    assert t["params"]["generator"]["program"] == "sockperf"
    assert m["rr.latency_p999_us"] >= m["rr.latency_p99_us"] >= m["rr.latency_p50_us"] > 0, m
    assert m["rr.transactions"] >= 1000 and m["rr.elapsed_s"] == pytest.approx(1.55)
    assert m["rr.cpu_us_per_tx.client"] > 0 and m["rr.cpu_us_per_tx.server"] > 0
    assert "p99.9" in res.stdout
    # under the measurement lock no other run's sockperf is running: none of this run's is left either
    assert [p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "sockperf"] == []
