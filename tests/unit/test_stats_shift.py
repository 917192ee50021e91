"""tunbench.stats.shift (Hodges-Lehmann / Mann-Whitney interval) and stats.multiple (Holm)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from tunbench.stats import holm, ratio_interval, shift_interval
from tunbench.stats.shift import mann_whitney_null_cdf


@pytest.mark.parametrize(("n", "m"), [(3, 3), (4, 5), (7, 6), (10, 10), (2, 12)])
def test_null_distribution_matches_scipy_exact(n: int, m: int) -> None:
    cdf = mann_whitney_null_cdf(n, m)
    assert len(cdf) == n * m + 1 and cdf[-1] == pytest.approx(1.0)
    rng = np.random.default_rng(n * 100 + m)
    for _ in range(20):
        x, y = rng.normal(size=n), rng.normal(size=m)
        res = sps.mannwhitneyu(x, y, method="exact", alternative="less")
        assert cdf[int(res.statistic)] == pytest.approx(res.pvalue, rel=1e-12)


def test_three_vs_three_is_the_widest_interval_with_its_true_coverage() -> None:
    b = np.array([10.0, 11.0, 12.0])
    c = np.array([20.0, 21.5, 23.0])
    s = shift_interval(b, c, 0.95)
    assert (s.low, s.high) == (20.0 - 12.0, 23.0 - 10.0)  # [min, max] of the 9 differences
    assert s.coverage == pytest.approx(1 - 2 / 20) and s.exact


def test_five_vs_five_uses_the_third_difference_from_each_end() -> None:
    rng = np.random.default_rng(1)
    b, c = rng.normal(size=5), rng.normal(size=5) + 1.0
    d = np.sort(np.subtract.outer(c, b).ravel())
    s = shift_interval(b, c, 0.95)
    assert (s.low, s.high) == (d[2], d[22])
    assert s.coverage == pytest.approx(1 - 2 * 4 / 252)  # P(U <= 2) = (1 + 1 + 2) / C(10, 5)


def test_interval_inverts_the_exact_rank_test() -> None:
    # 0 lies outside the interval exactly when the exact two-sided test rejects at 1 - coverage.
    rng = np.random.default_rng(2)
    for i in range(200):
        b, c = rng.normal(size=6), rng.normal(size=6) + rng.uniform(0.0, 2.0)
        s = shift_interval(b, c, 0.95)
        p = sps.mannwhitneyu(c, b, method="exact").pvalue
        assert (s.low > 0.0 or s.high < 0.0) == (p <= 1.0 - s.coverage + 1e-12), i


def test_large_samples_use_the_normal_approximation() -> None:
    rng = np.random.default_rng(3)
    s = shift_interval(rng.normal(size=60), rng.normal(size=60) + 0.5, 0.95)
    assert not s.exact and s.coverage == 0.95 and s.low < 0.5 < s.high


def test_ratio_interval_edges() -> None:
    r = ratio_interval(np.array([1.0, 2.0, 4.0]), np.array([2.0, 4.0, 8.0]), 0.95)
    assert r.low == pytest.approx(0.5) and r.high == pytest.approx(8.0)
    assert math.isnan(ratio_interval(np.array([0.0, 1.0]), np.array([1.0, 2.0]), 0.95).low)
    assert math.isnan(shift_interval(np.array([1.0]), np.array([1.0, 2.0]), 0.95).coverage)


def test_holm_against_hand_computed_values() -> None:
    # R: p.adjust(c(0.01, 0.02, 0.03, 0.04, 0.05), "holm") -> 0.05 0.08 0.09 0.09 0.09
    assert holm([0.01, 0.02, 0.03, 0.04, 0.05]) == pytest.approx([0.05, 0.08, 0.09, 0.09, 0.09])
    # input order is kept; NaN stays NaN and does not count in m; capped at 1
    out = holm([0.3, float("nan"), 0.01, 0.6])
    assert out[0] == pytest.approx(0.6) and math.isnan(out[1])
    assert out[2] == pytest.approx(0.03) and out[3] == pytest.approx(0.6)
    assert holm([0.04]) == pytest.approx([0.04])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    with pytest.raises(ValueError):
        holm([1.5])
