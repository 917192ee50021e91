"""Softirq and irq time per side (monitor/irqtime.py): which sides' CPUs are theirs alone, the sums over
them, and the counted-work hook recording them (or why not) around a window."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tunbench.monitor import irqtime, work
from tunbench.perf.count_work import CountWork
from tunbench.results import TrialRecord


def test_split_sides_are_each_attributed() -> None:
    cpus, why = irqtime.attribution({"client": "0", "server": "1"})
    assert cpus == {"client": [0], "server": [1]} and why == {}


def test_a_side_sharing_its_cpu_with_the_emulator_is_not_attributed() -> None:
    # `split` on a 2-CPU host with an emulated profile: the emulator shares CPU 1 with the server
    cpus, why = irqtime.attribution({"client": "0", "server": "1", "link": "1"})
    assert cpus == {"client": [0]}
    assert why == {"server": "not attributed: shares CPU 1 with the link"}


def test_overlapping_sides_and_unplaced_runs_are_not_attributed() -> None:
    cpus, why = irqtime.attribution({"client": "0-1", "server": "1-2"})
    assert cpus == {}
    assert why["client"] == "not attributed: shares CPU 1 with the server"
    assert why["server"] == "not attributed: shares CPU 1 with the client"
    cpus, why = irqtime.attribution({})
    assert cpus == {} and set(why) == {"client", "server"}
    assert why["client"].startswith("not attributed: the side is not placed")


def test_irq_metrics_sum_the_sides_cpus_only() -> None:
    before = [(10.0, 1.0), (20.0, 2.0), (30.0, 3.0)]
    after = [(10.5, 1.0), (20.25, 2.5), (31.0, 3.0)]  # CPU 2's second belongs to nobody placed
    m = irqtime.irq_metrics(before, after, {"client": [0], "server": [1]})
    assert m == {
        "work.client.softirq_s": 0.5,
        "work.client.irq_s": 0.0,
        "work.server.softirq_s": 0.25,
        "work.server.irq_s": 0.5,
    }


def _window(params: dict[str, Any], tmp_path: Path) -> TrialRecord:
    rec = TrialRecord(0, "socat", "socat", "lan", "iperf3", 1, "up", 0, params)
    tunnel = SimpleNamespace(pids=lambda role: [], daemons={})
    ctx = SimpleNamespace(workdir=tmp_path, ledger=None, client=None, server=None)
    pair = SimpleNamespace(counted_elsewhere=lambda t: {})  # two places on this machine: its perf counts both
    with CountWork(work.probe(None))(ctx, tunnel, rec, pair):  # type: ignore[arg-type]
        pass
    return rec


def test_the_hook_records_placed_sides_even_where_perf_cannot_count(tmp_path: Path) -> None:
    rec = _window({"cpuset": {"client": "0", "server": "0"}}, tmp_path)
    assert rec.params["work_irq"]["client"] == "not attributed: shares CPU 0 with the server"
    assert "work.client.softirq_s" not in rec.metrics
    assert rec.params["work"]["client"].startswith("not counted: perf is not installed")
    if irqtime.snapshot() is None:
        pytest.skip("a CPU is offline here: the per-CPU times cannot be matched")
    rec = _window({"cpuset": {"client": "0"}}, tmp_path)
    assert rec.metrics["work.client.softirq_s"] is not None and rec.metrics["work.client.softirq_s"] >= 0
    assert "work.server.softirq_s" not in rec.metrics
    assert rec.params["work_irq"] == {
        "server": "not attributed: the side is not placed on CPUs of its own (--cpuset split)"
    }
