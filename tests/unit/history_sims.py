"""Simulated series for `tunbench history`'s change points (issue 28 items 4 and 5), shared by the unit tests
(few series, fast) and scripts/stats_sims.py (many, for docs/history.md)."""

from __future__ import annotations

import numpy as np

from tunbench.results import RunRecord
from tunbench.stats.changepoints import change_points

ISSUE_LEVELS = (500, 465, 301, 518, 450, 273, 280, 306, 307, 302)
"""Throughput per commit, Mbit/s (issue 28): the third point measured by two runs at once, a 40% drop from
the sixth on."""


def issue_points(seed: int, within: float = 0.02) -> list[list[float]]:
    """The issue's shape, 3 trials per point with `within` (log SD) noise around each point's level."""
    rng = np.random.default_rng(seed)
    return [list(v * 1e6 * np.exp(rng.normal(0.0, within, 3))) for v in ISSUE_LEVELS]


def disturbed_shape(seeds: int = 20) -> str:
    found = 0
    for seed in range(seeds):
        cps = change_points(issue_points(seed))
        found += len(cps) == 1 and cps[0].index == 5 and 2 in cps[0].disturbed
    return f"step found at the sixth point, the third set aside as disturbed, in {found} of {seeds} noise draws"


def series(rng: np.random.Generator, n: int, step_at: int, step: float, between: float, within: float):
    """n points of 3 trials: each point's level varies by `between` (log SD; runs differ), each trial by
    `within`; from `step_at` on the level is exp(step) times higher."""
    out = []
    for i in range(n):
        level = 1e9 * np.exp((step if i >= step_at else 0.0) + rng.normal(0.0, between))
        out.append(list(level * np.exp(rng.normal(0.0, within, 3))))
    return out


def flat_false_changes(sims: int, seed: int) -> tuple[int, int]:
    rng = np.random.default_rng(seed)
    hits = sum(bool(change_points(series(rng, 20, 20, 0.0, 0.05, 0.02))) for _ in range(sims))
    return hits, sims


def change_coverage(
    sims: int, seed: int, step: float = 0.051, between: float = 0.03, within: float = 0.02
) -> tuple[int, float, int]:
    """Series with a true step of `step` after 10 of 20 points (`between` points, `within` trials): of the series
    where one change point was found within 1 point of the step, how many intervals cover the step, the mean
    estimate over the true step, and how many such series."""
    rng = np.random.default_rng(seed)
    covered, estimates = 0, []
    true = float(np.expm1(np.log1p(step)))
    for _ in range(sims):
        cps = change_points(series(rng, 20, 10, float(np.log1p(step)), between, within))
        if len(cps) == 1 and abs(cps[0].index - 10) <= 1:
            covered += cps[0].ci_low <= true <= cps[0].ci_high
            estimates.append(cps[0].change)
    n = len(estimates)
    return covered, float(np.mean(estimates) / true) if n else float("nan"), n


def gate_runs(m: int, rng: np.random.Generator, *, step: float = 0.0, points: int = 20) -> list[RunRecord]:
    """Issue 43 item 6: the runs of one history with m series (m tunnel labels, throughput): `points` runs, one per
    commit c1..cN, 3 trials per label, each point 5% (log SD) between runs, 2% within (as ``flat_false_changes``).
    With `step` (a log step), the first label drops by it from the middle run on, with 2% between runs."""
    from tunbench import metadata
    from tunbench.results import TrialRecord

    levels = {
        k: series(rng, points, points // 2, step, 0.02, 0.02)
        if step and k == 0
        else series(rng, points, points, 0.0, 0.05, 0.02)
        for k in range(m)
    }
    runs = []
    for i in range(points):
        prov = {
            "host": {"hostname": "bench-1", "kernel": "6.1.0"},
            "cpu": {"model": "Test CPU"},
            "machine": metadata.machine_identity("bench-1", "Test CPU", "6.1.0"),
            "build": {"commit": f"c{i + 1}", "branch": "main"},
        }
        r = RunRecord(
            id=i + 1, uid=f"tb{i:06d}", name="", started_at=f"2026-01-01T{i // 60:02d}:{i % 60:02d}:00+00:00",
            finished_at=None, status="done", tunbench_version="0", provenance=prov, scenario_text="",
            scenario_hash="", scenario={},
        )  # fmt: skip
        for k in range(m):
            for j, v in enumerate(levels[k][i]):
                r.trials.append(
                    TrialRecord(
                        seq=k * 3 + j + 1,
                        tunnel="socat",
                        label=f"t{k:02d}",
                        profile="lan",
                        workload="iperf3",
                        flows=1,
                        direction="up",
                        repetition=j + 1,
                        params={},
                        metrics={"throughput_bps": float(v), "window_s": 2.0},
                    )
                )
        runs.append(r)
    return runs


def gate_families(families: int, m: int, seed: int, *, step: float = 0.0) -> tuple[list[int], list[int], list[str]]:
    """`families` histories of m series each, gated with ``--fail-on-regression-since c1`` (every change after the
    first point counts): per family, the series with a regression change point after c1 (what failed the gate
    before issue 43 item 6), the series the gate fails now, and the labels the first family's gate fails."""
    from tunbench.report.history import build, gate, regressions_after

    rng = np.random.default_rng(seed)
    detected, failed, first = [], [], []
    for f in range(families):
        runs = gate_runs(m, rng, step=step if f == 0 else 0.0)
        h = build(runs, metrics=["throughput"])
        detected.append(len(gate(h, "c1", runs).entries))
        _, found = regressions_after(h, "c1", runs)
        failed.append(len({s.case for s, _ in found}))
        if f == 0:
            first = sorted({s.case.label for s, _ in found})
    return detected, failed, first


def flat_shift_pvalues(sims: int, seed: int, permutations: int = 999) -> list[float]:
    """The gate's shift test (``regression_test`` after the first point) on flat series of 20 points."""
    from tunbench.stats.changepoints import regression_test

    rng = np.random.default_rng(seed)
    return [
        regression_test(
            series(rng, 20, 20, 0.0, 0.05, 0.02), first=1, higher_is_better=True, permutations=permutations, seed=i
        ).pvalue
        for i in range(sims)
    ]
