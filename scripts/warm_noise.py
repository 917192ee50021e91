"""Where a paired A/A's noise lives: within a warm bring-up or between bring-ups (docs/benchmarks/precision.md, warm).

    PYTHONPATH=src .venv/bin/python scripts/warm_noise.py DB RUN [--budget 120]

RUN: a warm A/A run of one case (labels a and b, e.g. `tunbench run -t 'wireguard-go[label=a]'
-t 'wireguard-go[label=b]' --no-direct --direction up --duration 1 --omit 1 --repeat 40 --warm 10`).

Per metric (throughput, CPU per bit of client and server), from the window pairs' d = ln(b/a):
- the within-bring-up SD (pooled SD of d around its bring-up pair's mean: what averaging windows removes),
- the between-bring-up SD (the SD of the bring-up pairs' means, less the share the windows explain; the
  one-way random-effects estimate), the ICC, and the lag-1 autocorrelation of d inside a bring-up (for
  independent windows its estimate from W windows is biased to about -1/W, not 0);
- then, for W windows per bring-up, the SD of one unit (a pair of bring-ups, its windows' mean):
  sqrt(between^2 + within^2 / W), the seconds a unit takes (a bring-up pair's fixed cost plus W window
  pairs, both measured in this run) and the paired MDE a budget gives at that many units (the calibrate
  formula, Holm over the 3 metrics), against W = 1 (one window per bring-up, i.e. cold pairs).
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from datetime import datetime

import numpy as np

from tunbench.report.compare import metrics_for, pair_trials
from tunbench.stats.paired import min_detectable_effect_paired
from tunbench.store.db import Store

KINDS = ("throughput", "cpu")


def _t(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db")
    ap.add_argument("run")
    ap.add_argument("--budget", type=float, default=120.0, help="seconds per comparison (default 120)")
    args = ap.parse_args()
    with Store(args.db) as store:
        run = store.find_run(args.run)
    a = [t for t in run.trials if t.label == "a"]
    b = [t for t in run.trials if t.label == "b"]
    pairs, _ = pair_trials(a, b)
    metrics = metrics_for(run.trials, KINDS)
    # time: a window pair's wall clock, and a bring-up pair's fixed cost, from the trials' start times
    ordered = sorted(run.trials, key=lambda t: t.seq)
    units: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, (x, y) in enumerate(pairs):
        units[(str(x.params["warm"]["bringup"]), str(y.params["warm"]["bringup"]))].append(i)
    starts = [_t(t.started_at) for t in ordered]
    gaps = np.diff(starts)
    firsts = {t.seq for t in ordered if t.params.get("warm", {}).get("window") == 1}
    window_pair_s = 2 * float(np.median([g for t, g in zip(ordered[1:], gaps, strict=True) if t.seq not in firsts]))
    span = starts[-1] - starts[0]
    n_units = len(units)
    w_run = max(len(v) for v in units.values())
    fixed_s = max(0.0, (span - window_pair_s * (len(pairs) - 1)) / max(1, n_units - 1))
    print(f"{run.name}: {len(pairs)} window pairs on {n_units} bring-up pairs (up to {w_run} windows each)")
    print(f"a window pair takes {window_pair_s:.2f} s; a bring-up pair adds {fixed_s:.2f} s (set-up and tear-down)")
    family = len(metrics)
    level = 0.05 / family
    for m in metrics:
        d_units: list[np.ndarray] = []
        for idx in units.values():
            vals = []
            for i in idx:
                x, y = pairs[i]
                va, vb = m.value(x), m.value(y)
                if va and vb and va > 0 and vb > 0:
                    vals.append(math.log(vb / va))
            if len(vals) >= 2:
                d_units.append(np.array(vals))
        if len(d_units) < 2:
            continue
        within = float(np.sqrt(sum(((u - u.mean()) ** 2).sum() for u in d_units) / sum(len(u) - 1 for u in d_units)))
        means = np.array([u.mean() for u in d_units])
        w_mean = float(np.mean([len(u) for u in d_units]))
        var_means = float(np.var(means, ddof=1))
        between = math.sqrt(max(0.0, var_means - within**2 / w_mean))
        icc = between**2 / (between**2 + within**2) if within > 0 else float("nan")
        lag = [float(np.corrcoef(u[:-1], u[1:])[0, 1]) for u in d_units if len(u) >= 3 and np.std(u) > 0]
        print(
            f"\n{m.title}: within SD {within:.1%}, between SD {between:.1%} "
            f"(SD of unit means {math.sqrt(var_means):.1%}),"
            f" ICC {icc:.2f}, lag-1 autocorrelation {np.mean(lag):+.2f} (mean over {len(lag)} bring-ups; "
            f"about {-1 / w_mean:+.2f} for independent windows)"
        )
        for w in (1, 2, 3, 4, 6, 8, 10):
            sd = math.sqrt(between**2 + within**2 / w)
            unit_s = fixed_s + w * window_pair_s
            n = int(args.budget // unit_s)
            mde = min_detectable_effect_paired(sd, n, confidence=1 - level) if n >= 2 else float("inf")
            print(
                f"  W={w:2d}: unit SD {sd:.1%}, {unit_s:5.1f} s per unit, {n:3d} units in {args.budget:.0f} s, "
                f"MDE ±{mde:.1%}"
            )


if __name__ == "__main__":
    main()
