"""Interference figures from two edges (pure), the reason they give, and the live-run detection against
stale ledgers."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from tunbench.monitor import interference as itf
from tunbench.monitor.interference import Edge, Thresholds, between, reason


def edge(t: float, own_s: float, harness_s: float, others: dict[int, tuple[str, float]], runs: set[str]) -> Edge:
    """`others`: pid -> (name, CPU-s with its reaped children); `make` (pid 80) reaped `cc1`, the rest none."""
    alone = {p: (n, v - (2.5 if p == 80 and t > 0 else 0.0), v) for p, (n, v) in others.items()}
    return Edge(t, own_s, {1}, harness_s, alone, runs)


def test_foreign_cpu_is_every_other_process_with_what_it_reaped() -> None:
    a = edge(0.0, 50.0, 1.0, {77: ("stress", 3.0), 80: ("make", 10.0), 81: ("cc1", 2.0)}, set())
    # stress used 5 s; cc1 ended (its 2.5 s in all now in make's reaped children: make 10 -> 12.5 + 0.5 own);
    # gzip was born inside the window and used 1 s
    b = edge(10.0, 58.0, 1.05, {77: ("stress", 8.0), 80: ("make", 13.0), 90: ("gzip", 1.0)}, {"tb00aa11"})
    fig = between(a, b)
    # 5 + (13 - 10 - 2) + 1 = 7 CPU-s over 10 s
    assert fig["foreign_cpu_pct"] == pytest.approx(70.0)
    assert fig["harness_cpu_pct"] == pytest.approx(0.5)
    assert fig["runs"] == ["tb00aa11"]
    assert fig["top"][0] == ("stress", 50.0)
    # make's own CPU (0.5 s), not what it reaped, is what it burned
    assert ("make", 5.0) in fig["top"]


def test_foreign_cpu_never_goes_below_zero() -> None:
    a = edge(0.0, 50.0, 1.0, {77: ("sleep", 3.0)}, set())
    b = edge(1.0, 51.0, 1.0, {}, set())  # it ended and nobody we see reaped it
    assert between(a, b)["foreign_cpu_pct"] == 0.0


def test_reason_names_each_cause_and_respects_the_thresholds() -> None:
    fig = {"runs": ["tb00aa11"], "foreign_cpu_pct": 42.0, "top": [("stress", 40.0)]}
    why = reason(fig, 7.0, Thresholds())
    assert "another tunbench run live (tb00aa11)" in why
    assert "foreign CPU 42% of a core (stress 40%)" in why
    assert "steal 7.0%" in why
    quiet = {"runs": [], "foreign_cpu_pct": 3.0, "top": []}
    assert reason(quiet, 1.0, Thresholds()) == ""
    assert reason({"runs": [], "foreign_cpu_pct": 42.0}, None, Thresholds(foreign_cpu_pct=50.0)) == ""


def test_a_stale_ledger_of_a_killed_run_is_not_a_live_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tunbench.host import ledger as ledger_mod

    monkeypatch.setattr(ledger_mod, "STATE_DIR", tmp_path)
    me = psutil.Process()
    live = ledger_mod.Ledger("tb0000aa", me.pid, me.create_time())
    live.save()
    # the same pid, another start time: a killed run whose pid was reused
    ledger_mod.Ledger("tb0000bb", me.pid, me.create_time() - 1000.0).save()
    ledger_mod.Ledger("tb0000cc", 2**22 + 1, 0.0).save()  # a pid that does not exist
    assert itf.live_runs("tb0000ff") == {"tb0000aa"}
    assert itf.live_runs("tb0000aa") == set()  # its own ledger is not another run


def test_read_edge_counts_this_process_as_the_harness() -> None:
    a = itf.read_edge("tb0000ff")
    x = 0
    for i in range(300_000):  # some CPU of our own
        x += i * i
    b = itf.read_edge("tb0000ff")
    assert os.getpid() in b.own_pids
    assert b.harness_s > a.harness_s
    assert between(a, b)["harness_cpu_pct"] > 0.0
