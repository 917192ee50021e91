"""Synthetic runs for the report and compare unit tests (no root, no store needed)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tunbench.results import RunRecord, TrialRecord

PROFILE = {
    "name": "lan",
    "description": "Plain veth pair",
    "emulated": False,
    "up": {},
    "down": {},
    "mtu": None,
    "sysctl": {},
}


def trial(
    seq: int,
    label: str,
    bps: float,
    *,
    tunnel: str | None = None,
    flows: int = 1,
    direction: str = "up",
    repetition: int = 1,
    cpu_client_s: float | None = None,
    cpu_server_s: float | None = None,
    window_s: float = 2.0,
    status: str = "ok",
    extra: dict[str, float | None] | None = None,
) -> TrialRecord:
    m: dict[str, float | None] = {"throughput_bps": bps if status == "ok" else None, "window_s": window_s}
    m[f"throughput_bps.{direction}"] = m["throughput_bps"]
    for role, cpu in (("client", cpu_client_s), ("server", cpu_server_s)):
        m[f"processes.{role}"] = 1.0 if cpu is not None else 0.0
        m[f"cpu.{role}.user_s"] = cpu * 0.25 if cpu is not None else 0.0
        m[f"cpu.{role}.sys_s"] = cpu * 0.75 if cpu is not None else 0.0
        m[f"rss_peak_bytes.{role}"] = 8 * 2**20 if cpu is not None else 0.0
    m["retransmits"] = 3.0
    m.update(extra or {})
    share = [bps / flows * (1.0 + 0.1 * (i - (flows - 1) / 2)) for i in range(flows)]
    return TrialRecord(
        seq=seq,
        tunnel=tunnel or label.split("[")[0],
        label=label,
        profile="lan",
        workload="iperf3",
        flows=flows,
        direction=direction,
        repetition=repetition,
        params={"profile": PROFILE, "sysctls": {"net.ipv4.tcp_wmem": "4096 16384 33554432"}},
        status=status,
        error="" if status == "ok" else "tunnel did not come up\nmore detail",
        started_at="2026-01-01T00:00:00+00:00",
        window_s=window_s + 1.0,
        metrics=m,
        series={f"throughput_bps.{direction}": [(1.0, bps * 0.9), (2.0, bps * 1.1)]} if status == "ok" else {},
        streams=[(i + 5, direction, s, 0) for i, s in enumerate(share)] if status == "ok" else [],
    )


def run(trials: list[TrialRecord], *, rid: int = 1, uid: str = "tb000001", name: str = "") -> RunRecord:
    provenance: dict[str, Any] = {
        "host": {"hostname": "h", "kernel": "6.1", "arch": "x86_64"},
        "cpu": {"model": "Test CPU", "cores": 2, "freq_mhz": 2000},
        "tools": {"iperf3": "3.12"},
        "tunnels": {"socat": {"adapter": "socat", "version": "1.7", "params": {"buffer": "8192"}}},
        "seed": 1,
    }
    return RunRecord(
        id=rid,
        uid=uid,
        name=name,
        started_at="2026-01-01T00:00:00+00:00",
        finished_at="2026-01-01T00:01:00+00:00",
        status="done",
        tunbench_version="0.1.0",
        provenance=provenance,
        scenario_text='[run]\ntunnels = ["socat"]\n',
        scenario_hash="abc",
        scenario={"run": {"tunnels": ["socat"]}},
        trials=trials,
    )


def samples(median: float, n: int, cv: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(x) for x in median * (1.0 + cv * rng.standard_normal(n))]


def demo_run(*, rid: int = 1, uid: str = "tb000001", reps: int = 5, with_latency: bool = False) -> RunRecord:
    """direct, socat and a slow socat; 1 and 4 flows; up; ``reps`` repetitions each."""
    trials: list[TrialRecord] = []
    seq = 0
    for flows in (1, 4):
        cases: tuple[tuple[str, float, float | None], ...] = (
            ("direct", 17e9, None),
            ("socat", 4e9, 1.2),
            ("slow", 0.5e9, 1.5),
        )
        for label, med, cpu in cases:
            for r, bps in enumerate(samples(med, reps, 0.03, seed=seq + 7), start=1):
                seq += 1
                extra: dict[str, float | None] | None = None
                if with_latency:
                    extra = {"latency.p50_ms": 0.2 + 0.01 * r, "latency.p99_ms": 0.9}
                trials.append(trial(seq, label, bps, flows=flows, repetition=r, cpu_client_s=cpu, extra=extra))
    return run(trials, rid=rid, uid=uid, name="demo")
