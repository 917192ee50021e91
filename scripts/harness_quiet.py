#!/usr/bin/env python3
"""tunbench's own CPU during measured windows with the role sampler at 10 Hz (as before) and at 1 Hz (now),
side by side: alternating runs of the same tunnel, each run's trials' `harness.cpu_pct`, throughput and CPU
cross-checks.

    python scripts/harness_quiet.py --rounds 4 -- -t wireguard-go --direction up --duration 5 --repeat 2 --no-direct

Prints, per sampler interval: the harness's CPU in the windows (median and max, % of one core), the median
throughput, its coefficient of variation over all trials, and how many CPU cross-checks disagreed.
docs/benchmarks/interference.md holds a result.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

INTERVALS = (0.1, 1.0)


def one_run(interval: float, args: list[str], work: Path, n: int) -> list[dict[str, float | None]]:
    out = work / f"r{n}.json"
    env = {**os.environ, "TUNBENCH_SAMPLE_INTERVAL_S": str(interval)}
    cmd = [sys.executable, "-m", "tunbench", "run", "--db", str(work / f"r{n}.db"), "--json", str(out), *args]
    subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, timeout=3600)
    return [t["metrics"] for t in json.loads(out.read_text())["trials"] if t["status"] == "ok"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("run_args", nargs=argparse.REMAINDER, help="-- then `tunbench run` flags")
    a = ap.parse_args()
    run_args = [x for x in a.run_args if x != "--"]
    seen: dict[float, list[dict[str, float | None]]] = {i: [] for i in INTERVALS}
    with tempfile.TemporaryDirectory(prefix="tb-harness-") as tmp:
        n = 0
        for r in range(a.rounds):
            for interval in INTERVALS if r % 2 == 0 else INTERVALS[::-1]:
                n += 1
                seen[interval] += one_run(interval, run_args, Path(tmp), n)
                print(
                    f"round {r + 1}/{a.rounds}: sampler every {interval:g} s, {len(seen[interval])} trials", flush=True
                )
    for interval, trials in seen.items():
        harness = np.array([float(m.get("harness.cpu_pct") or np.nan) for m in trials])
        bps = np.array([float(m.get("throughput_bps") or np.nan) for m in trials])
        checks = [k for m in trials for k, v in m.items() if k.startswith("check.cpu.") and k.endswith(".ok")]
        failed = [
            k for m in trials for k, v in m.items() if k.startswith("check.cpu.") and k.endswith(".ok") and v == 0
        ]
        print(
            f"sampler every {interval:g} s: harness CPU in the windows {np.nanmedian(harness):.2f}% of a core "
            f"(max {np.nanmax(harness):.2f}%), throughput median {np.nanmedian(bps) / 1e6:.0f} Mbit/s, CV "
            f"{np.nanstd(bps, ddof=1) / np.nanmean(bps):.1%}, CPU cross-checks failed {len(failed)} of {len(checks)} "
            f"(n = {len(trials)} trials)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
