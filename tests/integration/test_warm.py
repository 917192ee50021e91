"""Warm alternation (`--warm N`): a block's tunnels come up once, side by side, and each round is a measured
window on them. Real wireguard-go, real iperf3."""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path

from tests.integration.helpers import leftovers, run_json
from tests.integration.test_lifecycle import ok_trials, start_run, wait_for


def test_warm_windows_share_one_bring_up_per_tunnel_per_block(tmp_path: Path) -> None:
    res, doc = run_json(
        tmp_path,
        *("-t", "wireguard-go[label=a]", "-t", "wireguard-go[label=b]", "--no-direct", "--direction", "up"),
        *("--duration", "1", "--omit", "0", "--repeat", "5", "--warm", "3"),
        timeout=240,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "warm: 10 trial(s) are windows on running tunnels, 3 per bring-up (4 bring-ups instead of 10)" in res.stdout
    trials = sorted(doc["trials"], key=lambda t: t["seq"])
    assert len(trials) == 10 and all(t["status"] == "ok" for t in trials), [t["error"] for t in trials]
    bringups = Counter((t["label"], t["params"]["warm"]["bringup"]) for t in trials)
    # rounds 1-3 on one bring-up per label, rounds 4-5 on another
    assert sorted(bringups.values()) == [2, 2, 3, 3], bringups
    for t in trials:
        assert t["throughput_bps"] > 1e6
        for role in ("client", "server"):
            assert t["cpu"][role]["user_s"] + t["cpu"][role]["sys_s"] > 0, (t["seq"], role)
        first = t["params"]["warm"]["window"] == 1
        assert (t["setup_s"] is not None) == first, (t["seq"], t["params"]["warm"], t["setup_s"])
    # windows of one round are paired: each repetition has one a and one b
    assert Counter(t["repetition"] for t in trials) == Counter({r: 2 for r in range(1, 6)})
    assert leftovers() == []


def test_ctrl_c_inside_a_warm_block_tears_both_tunnels_down(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    proc, prefix = start_run(
        db,
        *("-t", "wireguard-go[label=a]", "-t", "wireguard-go[label=b]", "--no-direct", "--direction", "up"),
        *("--duration", "2", "--omit", "0", "--repeat", "20", "--warm", "10"),
    )
    try:
        wait_for(lambda: ok_trials(db) >= 2, 90, "two finished windows")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert leftovers(prefix) == []
    assert ok_trials(db) >= 2, "finished windows must stay in the store"
