"""UDP through a real tunnel: a fixed-rate test and the RFC 2544 zero-loss search (bounded steps)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.helpers import run_json
from tunbench.store.db import Store


def stored_series(tmp_path: Path, doc: Any, label: str, workload: str) -> dict[str, list[tuple[float, float]]]:
    """The JSON export leaves the series out: read them from the store."""
    with Store(tmp_path / "r.db") as store:
        (rec,) = [t for t in store.find_run(doc["run"]["uid"]).trials if t.label == label and t.workload == workload]
    return rec.series


def test_udp_and_zero_loss_search_through_wireguard_go(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        '[run]\ntunnels = ["wireguard-go"]\nrepeat = 1\ndirect = false\n'
        '[workload]\nkind = ["udp", "udp-search"]\nduration_s = 1\n'
        '[workload.udp]\nrate = "50mbit"\nsize = 1200\n'
        '[workload.udp-search]\nsizes = [512, 1200]\nmax_steps = 5\nstep_s = 1\nmax_rate = "3gbit"\n'
    )
    res, doc = run_json(tmp_path, str(scenario))
    assert res.returncode == 0, res.stdout + res.stderr
    trials = {t["workload"]: t for t in doc["trials"]}
    assert all(t["status"] == "ok" for t in trials.values()), [t["error"] for t in trials.values()]
    udp = trials["udp"]["metrics"]
    assert udp["udp.offered_bps"] == 50e6
    assert 40e6 < udp["udp.sent_bps"] < 60e6  # the rate asked for, not iperf3's 1 Mbit/s default
    assert 0 <= udp["udp.loss"] < 0.5 and udp["udp.jitter_ms"] >= 0
    assert udp["udp.delivered_bps"] <= udp["udp.sent_bps"]
    search = trials["udp-search"]["metrics"]
    for size in (512, 1200):
        assert 1 <= search[f"search_steps.{size}"] <= 5
        # 3 Gbit/s of UDP does not fit through wireguard-go here: the search had to come down
        assert 0 < search[f"zero_loss_offered_bps.{size}"] < 3e9
        assert 0 < search[f"zero_loss_bps.{size}"] <= search[f"zero_loss_offered_bps.{size}"] * 1.05
        steps = stored_series(tmp_path, doc, "wireguard-go", "udp-search")[f"search_loss.{size}"]
        assert len(steps) == search[f"search_steps.{size}"]
        assert steps[0][0] == 3e9 and steps[0][1] > 0.001
    assert "udp-search (median of repetitions)" in res.stdout


def test_pps_ladder_and_mtu_cliff_through_direct_and_wireguard_go(tmp_path: Path) -> None:
    """Both packet workloads in one short run: the ladder finds a packet rate and (for the tunnel) a CPU per
    packet on each side; the cliff lands on each route's MTU minus 28 bytes (1500 for the veth, the 1420 the
    wireguard-go adapter sets)."""
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        '[run]\ntunnels = ["wireguard-go"]\nrepeat = 1\ndirect = true\n'
        '[workload]\nkind = ["pps", "mtu"]\ndirections = ["up"]\n'
        "[workload.pps]\nsizes = [64]\nmax_steps = 3\n"
        "[workload.mtu]\nstart = 1380\nstop = 1480\nstep = 50\n"
    )
    res, doc = run_json(tmp_path, str(scenario))
    assert res.returncode == 0, res.stdout + res.stderr
    trials = {(t["label"], t["workload"]): t for t in doc["trials"]}
    assert all(t["status"] == "ok" for t in trials.values()), [t["error"] for t in trials.values()]
    for label, route in (("direct", 1500), ("wireguard-go", 1420)):
        cliff = trials[(label, "mtu")]["metrics"]
        assert cliff["mtu.route_mtu_bytes"] == route
        assert cliff["mtu.max_payload_bytes"] == route - 28, cliff
        assert cliff["mtu.cliff_error_bytes"] == 0
        assert cliff["mtu.cliff_depth"] > 0.5
        ladder = trials[(label, "pps")]["metrics"]
        assert ladder["pps.64.delivered_pps"] > 0
        assert 1 <= ladder["pps.64.steps"] <= 3
    wg = trials[("wireguard-go", "pps")]["metrics"]
    assert all(wg[f"pps.64.cpu_us_per_packet.{role}"] > 0 for role in ("client", "server"))
    assert trials[("direct", "pps")]["metrics"].get("pps.64.cpu_us_per_packet.client") is None  # no tunnel process
    assert "pps (median of repetitions)" in res.stdout and "mtu (median of repetitions)" in res.stdout
