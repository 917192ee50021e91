"""Simulated series for `tunbench history`'s change points (issue 28 items 4 and 5), shared by the unit tests
(few series, fast) and scripts/stats_sims.py (many, for docs/history.md)."""

from __future__ import annotations

import numpy as np

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
