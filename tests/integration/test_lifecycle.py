"""Ctrl-C, SIGTERM and SIGKILL in the middle of a run: nothing is left behind, nothing measured is lost."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.helpers import RUN_LINE, STARTED, leftovers, tunbench


def start_run(db: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunbench", "run", "--db", str(db), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = RUN_LINE.search(line)
    assert m, f"no run line: {line!r}"
    STARTED.add(m.group(1))
    return proc, m.group(1)


def ok_trials(db: Path) -> int:
    try:
        con = sqlite3.connect(db)
        try:
            return int(con.execute("SELECT count(*) FROM trials WHERE status = 'ok'").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def wait_for(cond, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def tunnel_running(prefix: str) -> bool:
    return any(x.startswith("process") for x in leftovers(prefix))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_mid_trial_cleans_up_and_keeps_results(tmp_path: Path, sig: signal.Signals) -> None:
    db = tmp_path / "r.db"
    proc, prefix = start_run(
        db, "-t", "wireguard-go", "--no-direct", "--duration", "2", "--omit", "0", "--repeat", "20", "--direction", "up"
    )
    try:
        wait_for(lambda: ok_trials(db) >= 1, 60, "a first finished trial")
        wait_for(lambda: tunnel_running(prefix), 30, "the next trial's tunnel to be up")
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert "interrupted" in out
    assert leftovers(prefix) == []
    con = sqlite3.connect(db)
    status = con.execute("SELECT status FROM runs").fetchone()[0]
    con.close()
    assert status == "interrupted"
    assert ok_trials(db) >= 1, "finished trials must stay in the store"
    # the stored results are still usable
    show = tunbench("show", "--db", str(db))
    assert show.returncode == 0 and "wireguard-go" in show.stdout


def test_sigkill_then_clean_removes_everything(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    proc, prefix = start_run(
        db, "-t", "openvpn-udp", "--no-direct", "--duration", "5", "--omit", "0", "--repeat", "5", "--direction", "up"
    )
    try:
        wait_for(lambda: tunnel_running(prefix), 60, "a tunnel to be up")
        proc.kill()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = leftovers(prefix)
    kinds = {x.split()[0] for x in left}
    assert {"netns", "process", "state"} <= kinds, f"a SIGKILLed run should leave things to clean: {left}"
    res = tunbench("clean")
    assert res.returncode == 0, res.stderr
    assert "removed" in res.stdout
    assert leftovers(prefix) == []
    again = tunbench("clean").stdout
    assert prefix not in again and "removed" not in again  # other, live runs may be reported as left alone


def test_clean_leaves_live_runs_alone(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    proc, prefix = start_run(
        db, "-t", "socat", "--no-direct", "--duration", "1", "--omit", "0", "--repeat", "3", "--direction", "up"
    )
    try:
        wait_for(lambda: any(x.startswith("netns") for x in leftovers(prefix)), 30, "the run's namespaces")
        res = tunbench("clean")
        assert prefix in res.stdout and "still running" in res.stdout
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert ok_trials(db) == 3
