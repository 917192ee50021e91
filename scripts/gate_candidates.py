"""Which quantities are quiet on this host (issue 31, step 1): A/A runs of one tunnel (labels a and b of one
run, paired, each side on a CPU of its own, counted work on), at saturation with windows of 1, 2 and 4 s and
at fixed offered loads, in one sitting. Per configuration and metric: the pairs, the SD of the within-pair
log ratio d = ln(b/a) (what a paired comparison sees through), the mean of d (an A/A's is 0 but for drift),
the wall time a pair took in the run, and the MDE that SD gives at the pairs a 2-minute budget holds
(compare's paired formula, Holm over the metrics a gate would hold: here each metric on its own, level 5%,
and with 3 metrics gated, level 5%/3).

Usage (as root, alone on the machine):
  .venv/bin/python scripts/gate_candidates.py [TUNNEL] [--pairs N] [--only NAME,...] [--no-count]

--no-count measures without `--count-work` (perf stat costs the tunnel 18-29% of its throughput here:
docs/benchmarks/counted-work.md), so only throughput and CPU per bit."""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np

from tunbench.report.compare import metrics_for, pair_trials
from tunbench.stats.paired import min_detectable_effect_paired
from tunbench.store.db import Store

# name: (window seconds, offered rate or None for saturation)
CONFIGS: dict[str, tuple[int, str | None]] = {
    "sat-1s": (1, None),
    "sat-2s": (2, None),
    "sat-4s": (4, None),
    "100mbit-2s": (2, "100mbit"),
    "300mbit-2s": (2, "300mbit"),
    "600mbit-2s": (2, "600mbit"),
}
KINDS = ("throughput", "cpu", "work")
BUDGET_S = 120.0


def scenario(tmp: Path, name: str, tunnel: str, window: int, rate: str | None, pairs: int) -> Path:
    path = tmp / f"{name}.toml"
    text = (
        f'[run]\ntunnels = ["{tunnel}[label=a]", "{tunnel}[label=b]"]\nrepeat = {pairs}\ndirect = false\n'
        f'cpuset = "split"\n[workload]\nkind = "iperf3"\nduration_s = {window}\nomit_s = 1\ndirections = ["up"]\n'
    )
    if rate:
        text += f'[workload.iperf3]\nrate = "{rate}"\n'
    path.write_text(text)
    return path


def _t(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def measure(tmp: Path, name: str, tunnel: str, pairs: int, count: bool = True) -> list[dict[str, object]]:
    window, rate = CONFIGS[name]
    sc = scenario(tmp, name, tunnel, window, rate, pairs)
    db = tmp / f"{name}.db"
    counting = ["--count-work"] if count else []
    res = subprocess.run(
        [sys.executable, "-m", "tunbench", "run", str(sc), *counting, "--db", str(db), "--name", name],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if res.returncode not in (0, 1):
        raise SystemExit(f"{name}: exit {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    with Store(str(db)) as store:
        run = store.find_run(name)
    ok = [t for t in run.trials if t.status == "ok" and not (t.metrics.get("interfered") or 0) >= 0.5]
    a = [t for t in ok if t.label == "a"]
    b = [t for t in ok if t.label == "b"]
    pair_list, _ = pair_trials(a, b)
    starts = sorted(_t(t.started_at) for t in run.trials)
    pair_s = 2 * (starts[-1] - starts[0]) / max(1, len(starts) - 1)
    n_budget = max(2, int(BUDGET_S // pair_s))
    out = []
    for m in metrics_for(ok, KINDS):
        d = []
        for x, y in pair_list:
            va, vb = m.value(x), m.value(y)
            if va is not None and vb is not None and va > 0 and vb > 0:
                d.append(math.log(vb / va))
        if len(d) < 3:
            continue
        sd = float(np.std(d, ddof=1))
        out.append(
            {
                "config": name,
                "metric": m.name,
                "pairs": len(d),
                "sd_pct": 100 * sd,
                "mean_pct": 100 * statistics.fmean(d),
                "pair_s": pair_s,
                "pairs_in_2m": n_budget,
                "mde_2m_pct": 100 * min_detectable_effect_paired(sd, n_budget),
                "mde_2m_holm3_pct": 100 * min_detectable_effect_paired(sd, n_budget, confidence=1 - 0.05 / 3),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tunnel", nargs="?", default="wireguard-go")
    ap.add_argument("--pairs", type=int, default=16)
    ap.add_argument("--only", default="", help="comma-separated configuration names")
    ap.add_argument("--no-count", action="store_true", help="without --count-work")
    args = ap.parse_args()
    names = [n for n in CONFIGS if not args.only or n in args.only.split(",")]
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as d:
        for name in names:
            t0 = time.monotonic()
            got = measure(Path(d), name, args.tunnel, args.pairs, not args.no_count)
            rows += got
            print(f"{name}: {time.monotonic() - t0:.0f} s", flush=True)
            for r in got:
                print("  " + json.dumps(r), flush=True)
    print(
        "\n| config | metric | pairs | SD of ln(b/a) % | mean % | s per pair | pairs in 2 min | MDE 2 min % | Holm/3 |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['config']} | {r['metric']} | {r['pairs']} | {r['sd_pct']:.2f} | {r['mean_pct']:+.2f} | "
            f"{r['pair_s']:.1f} | {r['pairs_in_2m']} | {r['mde_2m_pct']:.2f} | {r['mde_2m_holm3_pct']:.2f} |"
        )


if __name__ == "__main__":
    main()
