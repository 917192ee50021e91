"""A result store with a known history, built with the Store API from synthetic trials (unit and browser tests)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tunbench import metadata
from tunbench.results import TrialRecord
from tunbench.store.db import Store

N_RUNS = 36
STEP_AT = 24  # runs 0..23 at 1 Gbit/s, then -6 %: a regression at commit c024


def _prov(host: str, commit: str) -> dict[str, object]:
    return {
        "host": {"hostname": host, "kernel": "6.1.0", "arch": "x86_64"},
        "cpu": {"model": "Test CPU", "cores": 2},
        "machine": metadata.machine_identity(host, "Test CPU", "6.1.0"),
        "build": {"commit": commit, "branch": "main"},
        "tunnels": {"socat": {"adapter": "socat", "version": "1.7", "params": {}}},
    }


def _trial(seq: int, bps: float, cpu_s: float) -> TrialRecord:
    m: dict[str, float | None] = {"throughput_bps": bps, "window_s": 2.0}
    for role in ("client", "server"):
        m[f"processes.{role}"] = 1.0
        m[f"cpu.{role}.user_s"] = cpu_s * 0.3
        m[f"cpu.{role}.sys_s"] = cpu_s * 0.7
    return TrialRecord(
        seq=seq, tunnel="socat", label="socat", profile="lan", workload="iperf3", flows=1, direction="up",
        repetition=seq, params={}, metrics=m, window_s=3.0,
    )  # fmt: skip


def _add_run(s: Store, uid: str, prov: dict[str, object], status: str, values: list[float]) -> int:
    rid = s.create_run(
        uid=uid, name="", tunbench_version="0.1.0", provenance=prov, scenario_text="", scenario_hash="", scenario={}
    )
    for i, v in enumerate(values):
        s.add_trial(rid, _trial(i + 1, v, 0.5))  # CPU seconds flat: CPU per bit rises as throughput falls
    s.finish_run(rid, status)
    return rid


def make_store(db: Path) -> Path:
    """36 finished runs of socat on bench-1 (commits c000..c035, 3 trials each), throughput 1 Gbit/s with 1 %
    noise, -6 % from run 24 (commit c024) on; an interrupted and a killed run; one run of another machine; and a
    last run (c036)."""
    rng = np.random.default_rng(7)
    with Store(db) as s:
        for i in range(N_RUNS):
            level = 1e9 * (0.94 if i >= STEP_AT else 1.0)
            values = list(level * (1 + 0.01 * rng.standard_normal(3)))
            _add_run(s, f"tb{i:06d}", _prov("bench-1", f"c{i:03d}"), "done", values)
            if i == 10:  # interrupted and killed runs are left out, whatever they measured
                _add_run(s, "tbfailed", _prov("bench-1", "cbad1"), "interrupted", [1e6] * 3)
                _add_run(s, "tbkilled", _prov("bench-1", "cbad2"), "killed", [1e6] * 3)
        _add_run(s, "tbother", _prov("bench-2", "c999"), "done", [5e8] * 3)  # another machine, not mixed in
        _add_run(s, "tblast", _prov("bench-1", f"c{N_RUNS:03d}"), "done", [0.94e9] * 3)
    return db
