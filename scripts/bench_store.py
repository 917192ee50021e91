"""The store's overhead per trial, SQLite vs PostgreSQL side by side: Store.add_trial (one transaction,
committed) for N realistic trials per backend, in alternating blocks (each block's backend order swapped
every round), on a throwaway PostgreSQL server (tests/pg.py, default durability: fsync on, over its Unix
socket) and an SQLite file in a temp dir (WAL, sqlite3's defaults). Prints per-trial milliseconds.

A trial here is what a 10 s iperf3 trial stores: 120 metrics, a per-second throughput series, 10 Hz CPU and
RSS series for both roles (4 x 100 points), 4 streams and an iperf3 JSON as an artifact (tests/data, 4 kB).

Usage (as root, like the tests): .venv/bin/python scripts/bench_store.py [TRIALS] [BLOCK]"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.pg import PgServer  # noqa: E402

from tunbench.results import TrialRecord  # noqa: E402
from tunbench.store.db import Store  # noqa: E402

IPERF3_JSON = (ROOT / "tests" / "data" / "iperf3-up-1flow.json").read_bytes()


def record(seq: int) -> TrialRecord:
    metrics: dict[str, float | None] = {f"m{i:03d}.{seq}": i * 1.5 for i in range(120)}
    series = {
        "throughput_bps.up": [(float(s), 9.4e8 + s) for s in range(1, 11)],
        **{f"cpu_pct.{r}": [(i / 10, 80.0 + i % 7) for i in range(100)] for r in ("client", "server")},
        **{f"rss_bytes.{r}": [(i / 10, 1.5e7 + i) for i in range(100)] for r in ("client", "server")},
    }
    return TrialRecord(
        seq=seq, tunnel="wireguard-go", label="wireguard-go", profile="lan", workload="iperf3", flows=4,
        direction="up", repetition=seq, started_at="2026-11-23T18:00:00+00:00", duration_s=10.0,
        params={"tunnel": {"bin": "wireguard-go"}, "workload": {"flows": 4, "duration_s": 10}, "mtu": 1500},
        metrics=metrics, series=series, streams=[(5 + i, "up", 2.35e8, 100 + i) for i in range(4)],
        artifacts={"iperf3.json": IPERF3_JSON},
    )  # fmt: skip


def new_run(store: Store) -> int:
    return store.create_run(
        uid="tbbe0000", name="bench", tunbench_version="0", provenance={}, scenario_text="", scenario_hash="",
        scenario={},
    )  # fmt: skip


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    block = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    tmp = Path(tempfile.mkdtemp(prefix="tb-bench-store-"))
    server = PgServer(fast=False).start()
    try:
        stores = {"sqlite": Store(tmp / "bench.db"), "postgresql": Store(server.url())}
        runs = {k: new_run(s) for k, s in stores.items()}
        times: dict[str, list[float]] = {k: [] for k in stores}
        seq = 0
        for rnd in range(n // block):
            order = list(stores) if rnd % 2 == 0 else list(reversed(stores))
            for k in order:
                for _ in range(block):
                    seq += 1
                    rec = record(seq)
                    t0 = time.perf_counter()
                    stores[k].add_trial(runs[k], rec)
                    times[k].append(time.perf_counter() - t0)
        print(f"Store.add_trial, {n} trials per backend, blocks of {block} alternating; ms per trial")
        print(f"{'backend':<11} {'median':>8} {'p10':>8} {'p90':>8} {'mean':>8} {'total s':>8}")
        for k, ts in times.items():
            ms = sorted(t * 1000 for t in ts)
            p10, p90 = ms[len(ms) // 10], ms[(len(ms) * 9) // 10]
            print(
                f"{k:<11} {statistics.median(ms):8.2f} {p10:8.2f} {p90:8.2f} {statistics.fmean(ms):8.2f} {sum(ts):8.2f}"
            )
        for s in stores.values():
            s.close()
    finally:
        server.remove()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
