"""The simulations behind the levels and coverages stated in docs/precision.md and docs/history.md (issue 28).

    PYTHONPATH=src python scripts/stats_sims.py stop      # --target-mde's stop rule: A/A false-positive rate
    PYTHONPATH=src python scripts/stats_sims.py paired    # compare's paired t: level and power at 3-10 pairs
    PYTHONPATH=src python scripts/stats_sims.py warm      # the report's CI with --warm windows: coverage
    PYTHONPATH=src python scripts/stats_sims.py history   # history: the disturbed-point shape, flat series, CI

Each prints its set-up and its rates with a Clopper-Pearson 95% interval. Fixed seeds: the same numbers each
time. Every simulation calls tunbench's own functions (stats.paired_precision, stats.compare_paired,
report.summary.summarize_trials, report.history.build), not re-implementations.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np
from scipy import stats as sps

from tunbench.results import TrialRecord
from tunbench.stats import adjust, compare_paired, signed_rank_p
from tunbench.stats.precision import paired_precision


def rate(hits: int, n: int) -> str:
    ci = sps.binomtest(hits, n).proportion_ci(0.95, method="exact")
    return f"{hits / n:.1%} ({hits}/{n}, 95% CI {ci.low:.1%}-{ci.high:.1%})"


def stop_level(target_sd: float, runs: int, *, seed: int, most: int = 60, centred: bool = False) -> tuple[int, int]:
    """A/A runs under the stop rule at a target of `target_sd` within-pair SDs: how many ended with a
    significant paired t (compare's verdict) and with a significant signed-rank test (the old verdict)."""
    rng = np.random.default_rng(seed)
    t_hits = rank_hits = 0
    for _ in range(runs):
        d = rng.normal(0.0, 1.0, most) * 0.05
        a = np.full(most, 1e9)
        b = a * np.exp(d)
        n = most
        for k in range(2, most + 1):
            if centred:
                sd = float(np.std(d[:k], ddof=1))
                mde = _mde(sd, k)
                reached = mde <= target_sd * 0.05
            else:
                reached = paired_precision({"x": (a[:k], b[:k])}, target=target_sd * 0.05).reached
            if reached:
                n = k
                break
        res = compare_paired(a[:n], b[:n], higher_is_better=True)
        t_hits += res.significant
        rank_hits += signed_rank_p(d[:n]) < 0.05
    return t_hits, rank_hits


def _mde(sd: float, n: int, level: float = 0.05) -> float:
    if n < 2:
        return math.inf
    if 2.0 ** (1 - n) >= level:  # the old rule: infinite below the rank test's floor
        return math.inf
    return float(sps.t.ppf(1 - level / 2, n - 1) + sps.t.ppf(0.8, n - 1)) * sd / math.sqrt(n)


def cmd_stop(runs: int) -> None:
    print(f"A/A, one comparison at alpha 0.05, within-pair log-ratio SD 5%, up to 60 pairs, {runs} runs per row")
    for target in (0.7, 0.9, 1.2):
        t_rms, _ = stop_level(target, runs, seed=int(target * 100))
        _, rank_sd = stop_level(target, runs, seed=int(target * 100), centred=True)
        print(
            f"  target {target} SD: RMS rule + paired t: {rate(t_rms, runs)};  "
            f"old (centred SD rule + signed rank): {rate(rank_sd, runs)}"
        )


def paired_rates(n: int, family: int, sims: int, *, dist: str, effect: float, seed: int) -> int:
    """How often compare's paired verdict (Holm over `family` independent comparisons, the first of which
    carries `effect` in log units) calls the first comparison significant."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(sims):
        rows = []
        for k in range(family):
            if dist == "normal":
                d = rng.normal(0.0, 0.05, n)
            elif dist == "t3":
                d = rng.standard_t(3, n) * 0.05 / math.sqrt(3.0)
            else:  # a 10% chance per pair of a disturbed pair 5x the spread
                d = rng.normal(0.0, 0.05, n) * np.where(rng.random(n) < 0.1, 5.0, 1.0)
            if k == 0:
                d = d + effect
            a = np.full(n, 1e9)
            rows.append(compare_paired(a, a * np.exp(d), higher_is_better=True))
        hits += adjust(rows)[0].significant
    return hits


def cmd_paired(sims: int) -> None:
    print(f"compare's paired t on log ratios (SD 5%), {sims} simulated comparisons per cell")
    for dist in ("normal", "t3", "contaminated"):
        cells = [f"n={n}: {rate(paired_rates(n, 1, sims, dist=dist, effect=0.0, seed=n), sims)}" for n in (3, 6, 10)]
        print(f"  level at alpha 0.05, {dist} differences: " + "; ".join(cells))
    for n in (3, 6):
        hits = paired_rates(n, 6, sims // 4, dist="normal", effect=math.log(5.6), seed=100 + n)
        print(f"  power, 5.6x change at {n} pairs, Holm over 6: {rate(hits, sims // 4)}")
    for n in (6, 10):
        hits = paired_rates(n, 3, sims, dist="normal", effect=0.05, seed=200 + n)
        print(f"  power, a change of 1 SD (5%) at {n} pairs, Holm over 3: {rate(hits, sims)}")


def warm_trials(rng: np.random.Generator, bringups: int, windows: int, between: float, within: float) -> list:
    out = []
    seq = 0
    for b in range(bringups):
        level = 1e9 * math.exp(rng.normal(0.0, between))
        for _ in range(windows):
            seq += 1
            rec = TrialRecord(seq, "socat", "socat", "lan", "iperf3", 1, "up", seq, {"warm": {"bringup": f"b{b}"}})
            rec.status = "ok"
            rec.metrics = {"throughput_bps": level * math.exp(rng.normal(0.0, within))}
            out.append(rec)
    return out


def cmd_warm(sims: int) -> None:
    from tunbench.report.summary import summarize_trials

    rng = np.random.default_rng(28)
    hits = 0
    n = 0
    for _ in range(sims):
        (s,) = summarize_trials(warm_trials(rng, 8, 5, 0.05, 0.01))
        hits += s.throughput.ci_low <= 1e9 <= s.throughput.ci_high
        n = s.throughput.n
    print(f"8 bring-ups x 5 windows, 5% between bring-ups, 1% within, {sims} runs: the report's n = {n}, ")
    print(f"  coverage of its CI of the median: {rate(hits, sims)} (stated coverage {s.throughput.ci_coverage:.3f})")


def cmd_history(sims: int) -> None:
    sys.path.insert(0, "tests/unit")
    from history_sims import change_coverage, disturbed_shape, flat_false_changes

    print(
        f"the issue's shape (500,465,301,518,450 | 273,280,306,307,302 Mbit/s, 3 trials each): {disturbed_shape(200)}"
    )
    hits, n = flat_false_changes(sims, seed=1)
    print(f"  flat series, 20 points x 3 trials, 5% between points, 2% within: a change point in {rate(hits, n)}")
    for between in (0.02, 0.03):
        cov, bias, n = change_coverage(sims, seed=2, between=between)
        print(
            f"  +5.1% step after 10 of 20 points, {between:.0%} between points, 2% within: found (within 1 point) "
            f"in {n} of {sims}; the change's interval covers in {rate(cov, n)}; mean estimate / true {bias:.2f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("stop", "paired", "warm", "history"))
    ap.add_argument("--sims", type=int, default=2000)
    args = ap.parse_args()
    {"stop": cmd_stop, "paired": cmd_paired, "warm": cmd_warm, "history": cmd_history}[args.what](args.sims)


if __name__ == "__main__":
    main()
