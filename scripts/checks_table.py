"""docs/benchmarks/throughput.md's cross-check table from a result store: per case, the CPU over the measured window
and over the whole call, the cgroup-vs-sampled difference, the wire bytes per sent byte, iperf3's own CPU
and the checks that disagreed.  Usage: .venv/bin/python scripts/checks_table.py STORE.db [RUN]"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from tunbench.monitor.crosscheck import failed_checks
from tunbench.store.db import Store

Metrics = dict[str, float | None]


def _cpu(m: Metrics, prefix: str, role: str) -> float:
    return (m.get(f"{prefix}.{role}.user_s") or 0.0) + (m.get(f"{prefix}.{role}.sys_s") or 0.0)


def _med(rows: list[Metrics], f: Callable[[Metrics], float | None]) -> float | None:
    vals = [v for v in (f(m) for m in rows) if v is not None]
    return statistics.median(vals) if vals else None


def pct(prefix: str, role: str, window: str) -> Callable[[Metrics], float | None]:
    return lambda m: 100 * _cpu(m, prefix, role) / (m.get(window) or 1.0)


def _fmt(v: float | None, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def main(db: str, run: str | None = None) -> None:
    with Store(Path(db)) as store:
        rec = store.find_run(run)
    cases: dict[tuple[str, str], list[Metrics]] = {}
    for t in rec.trials:
        if t.status == "ok":
            cases.setdefault((t.label, t.direction), []).append(t.metrics)
    print(
        "| tunnel | dir | n | CPU window client / server (% core) | CPU whole call client / server (%) "
        "| whole / window CPU-s | max abs(cgroup − sampled) CPU-s | wire bytes per sent byte | "
        "iperf3 CPU client / server (%) | checks failed |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    total = 0
    for (label, d), ms in sorted(cases.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        both = [_cpu(m, "cpu", "client") + _cpu(m, "cpu", "server") for m in ms]
        whole = _med(ms, lambda m: (_cpu(m, "trial_cpu", "client") + _cpu(m, "trial_cpu", "server")) or None)
        ratio = whole / statistics.median(both) if whole and statistics.median(both) else None
        diffs = [abs(v) for m in ms for k, v in m.items() if k.startswith("check.cpu") and k.endswith("diff_s") and v]
        failed = sorted({name for m in ms for name in failed_checks(m)})
        total += sum(1 for m in ms for k in m if k.startswith("check.") and k.endswith(".ok"))
        print(
            f"| {label} | {d} | {len(ms)} "
            f"| {_fmt(_med(ms, pct('cpu', 'client', 'window_s')), '.0f')} / "
            f"{_fmt(_med(ms, pct('cpu', 'server', 'window_s')), '.0f')} "
            f"| {_fmt(_med(ms, pct('trial_cpu', 'client', 'trial_window_s')), '.0f')} / "
            f"{_fmt(_med(ms, pct('trial_cpu', 'server', 'trial_window_s')), '.0f')} "
            f"| {_fmt(ratio, '.2f')} | {_fmt(max(diffs) if diffs else None, '.3f')} "
            f"| {_fmt(_med(ms, lambda m, k=f'check.bytes.{d}.dev.ratio': m.get(k)), '.3f')} "
            f"| {_fmt(_med(ms, lambda m: m.get('iperf3.cpu.client_pct')), '.0f')} / "
            f"{_fmt(_med(ms, lambda m: m.get('iperf3.cpu.server_pct')), '.0f')} | {', '.join(failed) or 'none'} |"
        )
    print(f"\n{sum(len(v) for v in cases.values())} trials ok, {total} checks run")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
