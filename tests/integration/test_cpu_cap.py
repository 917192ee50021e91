"""client_cpu= on a tunnel reference: a real CFS cap on the client's tunnel processes (wireguard-go, iperf3)."""

from __future__ import annotations

from pathlib import Path

from tests.integration.helpers import leftovers, run_json, tunbench


def test_client_cpu_caps_the_tunnel_client_and_leaves_nothing(tmp_path: Path) -> None:
    res, doc = run_json(
        tmp_path,
        *("-t", "wireguard-go[label=full]", "-t", "wireguard-go[client_cpu=25%,label=capped]", "--no-direct"),
        *("--direction", "up", "--duration", "2", "--omit", "1", "--repeat", "1"),
        timeout=180,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    trials = {t["label"]: t for t in doc["trials"]}
    assert trials["capped"]["params"]["cpu_cap"] == {"client": 25.0}
    assert "cpu_cap" not in trials["full"]["params"]
    share = {
        label: (t["cpu"]["client"]["user_s"] + t["cpu"]["client"]["sys_s"]) / t["duration_s"]
        for label, t in trials.items()
    }
    # the cap holds the client's tunnel process to about a quarter of a core (CFS periods of 100 ms: a little
    # slack), where the uncapped one uses most of a core on this path
    assert 0.05 < share["capped"] <= 0.32, share
    assert share["full"] > 0.4, share
    assert leftovers() == []


def test_client_cpu_is_refused_where_no_cap_applies() -> None:
    res = tunbench("run", "-t", "wireguard-go[client_cpu=50%]", "-w", "storm", "--dry-run")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "client_cpu=" in res.stderr and "'storm'" in res.stderr
