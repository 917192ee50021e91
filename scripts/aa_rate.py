"""A/A false-positive rate and the a/b, first/second split of A/A runs (docs/benchmarks/precision.md).

    # measure: N short A/A comparisons, each its own `tunbench run` (stored in DB), each under the shared
    # measurement lock on its own (so other measurements can interleave between them)
    scripts/aa_rate.py measure DB --runs 10 --pairs 8 --prefix aa [--lock /tmp/tb-measure.lock]
    # two builds alternated in one sitting (e.g. before and after a change): --variant NAME=PYTHONPATH, cyclic
    scripts/aa_rate.py measure DB --runs 30 --pairs 8 --prefix aa- --variant new=/tmp/new/src \
        --variant new=/tmp/new/src --variant old=/tmp/old/src
    # analyse every run of DB whose name starts with PREFIX
    scripts/aa_rate.py analyse DB --prefix aa
    # with more run options, e.g. CPU placement
    scripts/aa_rate.py measure DB --runs 30 --pairs 8 --prefix aac- --run-args '--cpuset split'
    # two placements alternated in one sitting
    scripts/aa_rate.py measure DB --runs 40 --pairs 8 --prefix aap- --variant off=src --variant split=src \
        --variant-args split='--cpuset split'

`measure` runs, per comparison (seeds 1000+i unless --seed-base):

    tunbench run -t 'wireguard-go[label=a]' -t 'wireguard-go[label=b]' --no-direct --direction up \
        --duration 1 --omit 1 --repeat PAIRS --seed S --name PREFIX-S --db DB

`analyse` prints, per run, compare's paired verdict (labels a and b, alpha 0.05, Holm over the 3 gated
metrics) for throughput and CPU/bit client/server, and how many pairs had a first; then over all runs the
count of regressed/improved verdicts (with a Clopper-Pearson 95% CI of the false-positive rate) and, per
metric, the pooled within-pair log ratios split three ways: ln(b/a) (the label), ln(second/first) (the
position in the block, which is also the seq parity), and ln(b/a) by which label ran first.

Run it with the project's interpreter and PYTHONPATH=src; `measure` needs root.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import subprocess
import sys
import time
from typing import Any

from scipy import stats as sps

from tunbench.report.compare import compare_runs, metrics_for
from tunbench.results import RunRecord, TrialRecord
from tunbench.store.db import Store

TUNNEL = "wireguard-go"
KINDS = ("throughput", "cpu")


def measure(args: argparse.Namespace) -> None:
    variants = [v.split("=", 1) for v in args.variant] or [["", ""]]
    for i in range(args.runs):
        seed = args.seed_base + i
        name, src = variants[i % len(variants)]
        env = {**os.environ, **({"PYTHONPATH": src} if src else {})}
        prefix = f"{args.prefix}{name}"
        cmd = [
            sys.executable, "-m", "tunbench", "run",
            "-t", f"{args.tunnel}[label=a]", "-t", f"{args.tunnel}[label=b]",
            "--no-direct", "--direction", "up", "--duration", str(args.duration), "--omit", str(args.omit),
            "--repeat", str(args.pairs), "--seed", str(seed), "--name", f"{prefix}-{seed}", "--db", args.db,
            *shlex.split(args.run_args),
            *shlex.split(dict(v.split("=", 1) for v in args.variant_args).get(name, "")),
        ]  # fmt: skip
        if args.lock:
            cmd = ["flock", args.lock, *cmd]
        t0 = time.monotonic()
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False, env=env)
        load = open("/proc/loadavg").read().split()[0]  # noqa: SIM115 - one read
        print(f"{prefix}-{seed}: rc {rc.returncode}, {time.monotonic() - t0:.0f} s, load {load}", flush=True)
        if rc.returncode not in (0, 4):
            sys.stderr.write(rc.stderr[-2000:])


def _pairs(run: RunRecord) -> list[tuple[TrialRecord, TrialRecord]]:
    """(a, b) ok trials per repetition."""
    by: dict[int, dict[str, TrialRecord]] = {}
    for t in run.trials:
        if t.status == "ok":
            by.setdefault(t.repetition, {})[t.label] = t
    return [(d["a"], d["b"]) for _, d in sorted(by.items()) if "a" in d and "b" in d]


def _clopper_pearson(k: int, n: int) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(sps.beta.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(sps.beta.ppf(0.975, k + 1, n - k))
    return lo, hi


def _mean_t(xs: list[float]) -> str:
    n = len(xs)
    if n < 2:
        return f"n {n}"
    m = sum(xs) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    t = m / (sd / math.sqrt(n)) if sd > 0 else math.inf
    p = 2 * float(sps.t.sf(abs(t), n - 1))
    pos = sum(1 for x in xs if x > 0)
    return f"mean {m:+.4f} (sd {sd:.3f}, n {n}, t {t:+.2f}, p {p:.3f}; > 0 in {pos}/{n})"


def _lag1(run: Any) -> float | None:
    """Pearson correlation of each ok trial's log throughput with the next one's (by seq), None under 4."""
    xs = [
        math.log(v)
        for t in sorted(run.trials, key=lambda t: t.seq)
        if t.status == "ok" and (v := t.metrics.get("throughput_bps"))
    ]
    if len(xs) < 4:
        return None
    a, b = xs[:-1], xs[1:]
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b, strict=True))
    var = math.sqrt(sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b))
    return cov / var if var > 0 else None


def analyse(args: argparse.Namespace) -> None:
    with Store(args.db) as store:
        # finished runs only (a run still measuring, or interrupted, is left out)
        runs = [
            store.find_run(str(r.id)) for r in store.runs() if r.name.startswith(args.prefix) and r.status == "done"
        ]
    if not runs:
        sys.exit(f"no run named {args.prefix}* in {args.db}")
    metrics = metrics_for([t for r in runs for t in r.trials], KINDS)
    by_label: dict[str, list[float]] = {m.title: [] for m in metrics}
    by_pos: dict[str, list[float]] = {m.title: [] for m in metrics}
    a_first: dict[str, list[float]] = {m.title: [] for m in metrics}
    b_first: dict[str, list[float]] = {m.title: [] for m in metrics}
    verdicts: dict[str, dict[str, int]] = {m.title: {"regressed": 0, "improved": 0} for m in metrics}
    any_fp = 0
    compared = 0
    for run in runs:
        pairs = _pairs(run)
        n_afirst = sum(1 for a, b in pairs if a.seq < b.seq)
        res = compare_runs(run, run, label_a="a", label_b="b", kinds=KINDS)
        outs = {r.metric.title: res.outcome(r) for r in res.rows if r.gated}
        ps = {r.metric.title: r.result.p_adjusted for r in res.rows if r.gated}
        compared += 1
        if any(o in ("regressed", "improved") for o in outs.values()):
            any_fp += 1
        for title, o in outs.items():
            if o in ("regressed", "improved"):
                verdicts[title][o] += 1
        wins = {
            m.title: sum(1 for a, b in pairs if (m.value(b) or 0.0) > (m.value(a) or 0.0)) for m in metrics
        }  # b's value above a's (faster, or costlier per bit)
        cells = "  ".join(
            f"{t}: {outs.get(t, '-')} (p {ps.get(t, math.nan):.2f}, b > a in {wins[t]})" for t in by_label
        )
        print(f"{run.name}: {len(pairs)} pairs, a first in {n_afirst}; {cells}")
        for m in metrics:
            for a, b in pairs:
                va, vb = m.value(a), m.value(b)
                if not va or not vb or va <= 0 or vb <= 0:
                    continue
                d = math.log(vb / va)
                by_label[m.title].append(d)
                by_pos[m.title].append(d if a.seq < b.seq else -d)
                (a_first if a.seq < b.seq else b_first)[m.title].append(d)
    print(f"\n{compared} A/A comparisons (paired, alpha 0.05, Holm over the gated metrics):")
    for title, v in verdicts.items():
        k = v["regressed"] + v["improved"]
        lo, hi = _clopper_pearson(k, compared)
        print(
            f"  {title}: {v['regressed']} regressed, {v['improved']} improved: {k}/{compared} = {k / compared:.0%} "
            f"[95% CI {lo:.0%}, {hi:.0%}]"
        )
    lo, hi = _clopper_pearson(any_fp, compared)
    print(f"  any metric: {any_fp}/{compared} = {any_fp / compared:.0%} [95% CI {lo:.0%}, {hi:.0%}]")
    trials = [t for r in runs for t in r.trials if t.status == "ok"]
    for key in ("host.busy_pct", "host.steal_pct"):
        v = sorted(float(x) for t in trials if (x := t.metrics.get(key)) is not None)
        if v:
            print(f"  {key} over {len(v)} trials: median {v[len(v) // 2]:.1f}, max {v[-1]:.1f}")
    lags = [lag for r in runs if (lag := _lag1(r)) is not None]
    if lags:
        print(
            f"  lag-1 autocorrelation of a run's log throughput (its trials in order): "
            f"mean {sum(lags) / len(lags):+.2f} over {len(lags)} runs"
        )
    print("\npooled within-pair log ratios (one-sample t over all pairs of all runs):")
    for title in by_label:
        print(f"  {title}")
        print(f"    ln(b/a)             {_mean_t(by_label[title])}")
        print(f"    ln(second/first)    {_mean_t(by_pos[title])}")
        print(f"    ln(b/a), a first    {_mean_t(a_first[title])}")
        print(f"    ln(b/a), b first    {_mean_t(b_first[title])}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("db")
    m.add_argument("--runs", type=int, default=10)
    m.add_argument("--pairs", type=int, default=6)
    m.add_argument("--duration", type=int, default=1)
    m.add_argument("--omit", type=int, default=1)
    m.add_argument("--seed-base", type=int, default=1000)
    m.add_argument("--prefix", default="aa")
    m.add_argument("--tunnel", default=TUNNEL)
    m.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME=PYTHONPATH: run comparison i with the i-th variant (cyclically), named PREFIXNAME-SEED",
    )
    m.add_argument(
        "--variant-args",
        action="append",
        default=[],
        help="NAME=OPTIONS: more `tunbench run` options for one variant, e.g. split='--cpuset split'",
    )
    m.add_argument("--run-args", default="", help="more options for each `tunbench run`, e.g. '--cpuset split'")
    m.add_argument("--lock", default="/tmp/tb-measure.lock", help="flock this file around each run ('' = none)")
    a = sub.add_parser("analyse")
    a.add_argument("db")
    a.add_argument("--prefix", default="aa")
    args = p.parse_args()
    os.environ.setdefault("COLUMNS", "200")
    (measure if args.cmd == "measure" else analyse)(args)


if __name__ == "__main__":
    main()
