"""Ctrl-C in the middle of a 200-client storm, and SIGKILL + `tunbench clean`: nothing is left behind."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from tests.integration.helpers import leftovers, tunbench
from tests.integration.test_lifecycle import start_run, wait_for

STORM = """
[run]
tunnels = ["wireguard-go"]
repeat = 1
direct = false
[workload]
kind = ["storm"]
[workload.storm]
clients = [{n}]
timeout_s = 60
"""


def client_processes(prefix: str) -> int:
    return sum(1 for x in leftovers(prefix) if x.startswith("process") and "wireguard-go" in x)


def test_ctrl_c_mid_storm_of_200_clients_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(STORM.format(n=200))
    proc, prefix = start_run(tmp_path / "r.db", str(path))
    try:
        wait_for(lambda: client_processes(prefix) >= 20, 90, "the storm to be under way")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert leftovers(prefix) == []


def test_clean_removes_what_a_sigkilled_storm_left(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(STORM.format(n=60))
    proc, prefix = start_run(tmp_path / "r.db", str(path))
    try:
        wait_for(lambda: client_processes(prefix) >= 30, 90, "clients to be running")
        proc.kill()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert leftovers(prefix), "SIGKILL should have left something for clean to remove"
    res = tunbench("clean", timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    subprocess.run(["sleep", "0.2"], check=False)
    assert leftovers(prefix) == []
