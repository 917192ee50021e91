"""Stopping many process groups at once (host/proc.stop_groups): every group gets its SIGTERM before any
wait, the waits are shared (two of them, whatever the number of groups), and a group that ignores SIGTERM is
SIGKILLed. Real processes: `sh` children in sessions of their own, as Daemon starts them."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tunbench.host import proc


def _stubborn(tmp: Path, i: int) -> subprocess.Popen[bytes]:
    """A group leader that writes a file when it gets SIGTERM and keeps running (as a slow-exiting client)."""
    script = f"trap 'echo term > {tmp}/{i}' TERM; echo up > {tmp}/up{i}; while :; do sleep 0.05; done"
    return subprocess.Popen(["sh", "-c", script], start_new_session=True)


def _wait_up(tmp: Path, n: int) -> None:
    deadline = time.monotonic() + 10.0
    while sum((tmp / f"up{i}").exists() for i in range(n)) < n:
        assert time.monotonic() < deadline, "the test's shells did not start"
        time.sleep(0.01)


def test_every_group_is_termed_then_killed_with_two_shared_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 8
    procs = [_stubborn(tmp_path, i) for i in range(n)]
    try:
        _wait_up(tmp_path, n)
        waits: list[int] = []
        real = proc._wait_groups

        def counted(pgids: list[int], leaders: dict[int, subprocess.Popen[bytes]], timeout_s: float) -> list[int]:
            waits.append(len(pgids))
            return real(pgids, leaders, timeout_s)

        monkeypatch.setattr(proc, "_wait_groups", counted)
        left = proc.stop_groups([p.pid for p in procs], leaders=procs, term_timeout_s=0.3)
        assert left == []
        assert waits == [n, n], "one wait for all the SIGTERMs, one for all the SIGKILLs"
        assert all((tmp_path / str(i)).read_text().strip() == "term" for i in range(n))
        assert all(p.poll() == -signal.SIGKILL for p in procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_groups_that_end_on_sigterm_are_not_killed(tmp_path: Path) -> None:
    procs = [subprocess.Popen(["sleep", "30"], start_new_session=True) for _ in range(5)]
    try:
        assert proc.stop_groups([p.pid for p in procs], leaders=procs, term_timeout_s=10.0) == []
        assert all(p.poll() == -signal.SIGTERM for p in procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


class _Recorder:
    """A place that only records what it was asked to stop (the grouping is under test, not the stopping)."""

    def __init__(self, machine: str, calls: list[tuple[str, list[str]]]) -> None:
        self.machine = machine
        self._calls = calls

    def stop(self, procs: list[str]) -> None:
        self._calls.append((self.machine, list(procs)))


def test_a_fleet_stops_its_clients_with_one_call_per_machine() -> None:
    """Every client has a place of its own (its namespace), but the places of one machine stop together: one
    stop for this machine's 4 clients and one request to host h2's agent for its 2, not one each."""
    from types import SimpleNamespace

    from tunbench.tunnels.fleet import Fleet

    calls: list[tuple[str, list[str]]] = []
    places = {i: _Recorder("" if i < 4 else "h2", calls) for i in range(6)}
    fleet = SimpleNamespace(
        clients={i: f"client{i}" for i in range(6)}, places=SimpleNamespace(client=lambda i: places[i])
    )
    Fleet.stop_clients(fleet, [0, 1, 2, 3, 4, 5, 9])  # type: ignore[arg-type]
    assert sorted(calls) == [("", ["client0", "client1", "client2", "client3"]), ("h2", ["client4", "client5"])]
    assert fleet.clients == {}
