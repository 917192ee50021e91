"""Tests for tunbench.stats.compare: verdicts, regression gate, power and warnings."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import stats as sps

from tunbench.stats import (
    compare,
    min_attainable_p,
    min_detectable_effect,
    min_repetitions,
    required_repetitions,
)

R = 2000  # bootstrap resamples: plenty for the CI ends at these n, keeps the file fast


def _sample(median: float, noise: float, n: int, seed: int) -> np.ndarray:
    return median * (1.0 + np.random.default_rng(seed).normal(0.0, noise, n))


def test_clearly_slower_candidate_is_worse_and_regressed() -> None:
    base = _sample(1e9, 0.01, 10, seed=1)
    cand = _sample(0.9e9, 0.01, 10, seed=2)
    c = compare(base, cand, higher_is_better=True, threshold=0.03, resamples=R)
    assert c.verdict == "worse"
    assert c.regressed
    assert c.significant
    assert c.change == pytest.approx(-0.10, abs=0.015)
    assert c.ci_low < c.change < c.ci_high < 0.0
    assert c.p_value < 0.001
    assert c.warnings == ()


def test_clearly_faster_candidate_is_better_not_regressed() -> None:
    c = compare(_sample(1e9, 0.01, 10, 1), _sample(1.1e9, 0.01, 10, 2), higher_is_better=True, resamples=R)
    assert c.verdict == "better"
    assert not c.regressed
    assert c.ci_low > 0.0


def test_identical_values_no_change() -> None:
    x = _sample(100.0, 0.02, 10, seed=3)
    c = compare(x, x.copy(), higher_is_better=True, resamples=R)
    assert c.verdict == "no significant change"
    assert c.change == 0.0
    assert c.ci_low <= 0.0 <= c.ci_high
    assert c.p_value == pytest.approx(1.0)


def test_same_distribution_false_positive_rate() -> None:
    # 100 A/A comparisons (n = 8 each). The verdict needs p < 0.05 (and more), so the false
    # positive rate is <= 0.05; with 100 trials its binomial sd is ~0.022, allow 3 sd: <= 0.115.
    false_pos = 0
    for i in range(100):
        a, b = _sample(100.0, 0.03, 8, 2 * i), _sample(100.0, 0.03, 8, 2 * i + 1)
        false_pos += compare(a, b, higher_is_better=True, resamples=1000, seed=i).significant
    assert false_pos / 100 <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 100)


def test_threshold_is_respected() -> None:
    base = _sample(100.0, 0.002, 10, seed=4)
    cand = _sample(98.0, 0.002, 10, seed=5)  # a clear, significant 2 % drop
    strict = compare(base, cand, higher_is_better=True, threshold=0.01, resamples=R)
    assert strict.verdict == "worse" and strict.regressed
    lenient = compare(base, cand, higher_is_better=True, threshold=0.03, resamples=R)
    assert lenient.verdict == "no significant change"
    assert not lenient.regressed
    assert lenient.ci_high < 0.0  # the drop is real, just below the threshold
    assert lenient.change == pytest.approx(strict.change)


def test_lower_is_better_flips_direction() -> None:
    latency_ms = _sample(50.0, 0.01, 10, seed=6)
    slower = _sample(55.0, 0.01, 10, seed=7)
    faster = _sample(45.0, 0.01, 10, seed=8)
    worse = compare(latency_ms, slower, higher_is_better=False, threshold=0.03, resamples=R)
    assert worse.change > 0.0 and worse.verdict == "worse" and worse.regressed
    better = compare(latency_ms, faster, higher_is_better=False, threshold=0.03, resamples=R)
    assert better.change < 0.0 and better.verdict == "better" and not better.regressed
    # The same data read as throughput gives the opposite verdict.
    assert compare(latency_ms, slower, higher_is_better=True, resamples=R).verdict == "better"


def test_three_vs_three_can_never_be_significant_and_says_why() -> None:
    c = compare([100.0, 101.0, 99.0], [80.0, 81.0, 79.0], higher_is_better=True, resamples=R)
    assert c.p_value == pytest.approx(0.1)  # the exact test's floor at 3 vs 3
    assert c.ci_high < 0.0  # the bootstrap alone would have called it
    assert c.verdict == "no significant change"
    assert not c.regressed
    assert math.isinf(c.min_detectable_effect)
    (w,) = [w for w in c.warnings if w.code == "cannot-reach-significance"]
    assert "0.1 >= 0.05" in w.message
    assert f"--repeat {min_repetitions(paired=False)}" in w.fix  # the one rule: 4 per side


def test_tied_three_vs_three_normal_approximation_is_not_trusted() -> None:
    base, cand = [1.0, 1.0, 1.0], [2.0, 2.0, 2.0]
    # scipy falls back to the normal approximation with ties and reports p < 0.05 ...
    assert sps.mannwhitneyu(base, cand, alternative="two-sided").pvalue < 0.05
    # ... but the exact test cannot go below 0.1 at 3 vs 3, so the verdict must not be significant.
    assert compare(base, cand, higher_is_better=True, resamples=R).verdict == "no significant change"


def test_four_vs_four_can_be_significant() -> None:
    c = compare([100.0, 101.0, 99.0, 100.5], [80.0, 81.0, 79.0, 80.5], higher_is_better=True, resamples=R)
    assert c.p_value == pytest.approx(2 / 70)
    assert c.verdict == "worse"


def test_min_attainable_p() -> None:
    assert min_attainable_p(3, 3) == pytest.approx(0.1)
    assert min_attainable_p(3, 4) == pytest.approx(2 / 35)
    assert min_attainable_p(4, 4) == pytest.approx(2 / 70)
    assert min_attainable_p(1, 1) == 1.0
    assert min_attainable_p(0, 5) == 1.0


def test_min_detectable_effect_formula_and_monotonicity() -> None:
    df = 18
    expected = (sps.t.ppf(0.975, df) + sps.t.ppf(0.8, df)) * math.sqrt(2) * 0.02 / math.sqrt(10)
    assert min_detectable_effect(0.02, 10, 0.02, 10) == pytest.approx(expected)
    assert min_detectable_effect(0.02, 20, 0.02, 20) < min_detectable_effect(0.02, 10, 0.02, 10)
    assert min_detectable_effect(0.04, 10, 0.04, 10) == pytest.approx(2 * expected)
    assert math.isinf(min_detectable_effect(0.02, 3, 0.02, 3))
    assert math.isnan(min_detectable_effect(float("nan"), 10, 0.02, 10))


def test_comparison_reports_min_detectable_effect_from_observed_cv() -> None:
    base, cand = _sample(100.0, 0.02, 10, 9), _sample(100.0, 0.02, 10, 10)
    c = compare(base, cand, higher_is_better=True, resamples=R)
    assert c.min_detectable_effect == pytest.approx(min_detectable_effect(c.baseline.cv, 10, c.candidate.cv, 10))
    assert 0.01 < c.min_detectable_effect < 0.05


def test_required_repetitions_consistent_with_mde() -> None:
    n = required_repetitions(0.02, 0.02)
    assert min_detectable_effect(0.02, n, 0.02, n) <= 0.02 < min_detectable_effect(0.02, n - 1, 0.02, n - 1)
    assert required_repetitions(0.0, 0.01) == 4  # noise-free: only the rank test's floor matters
    with pytest.raises(ValueError):
        required_repetitions(0.02, 0.0)


def test_underpowered_warning_when_threshold_below_mde() -> None:
    base, cand = _sample(100.0, 0.05, 6, 11), _sample(100.0, 0.05, 6, 12)
    c = compare(base, cand, higher_is_better=True, threshold=0.01, resamples=R)
    (w,) = [w for w in c.warnings if w.code == "underpowered"]
    assert "1.0% threshold" in w.message
    m = re.search(r"--repeat (\d+)", w.fix)
    assert m is not None and int(m.group(1)) > 6
    quiet = compare(_sample(100.0, 0.001, 10, 1), _sample(100.0, 0.001, 10, 2), higher_is_better=True, threshold=0.01)
    assert all(w.code != "underpowered" for w in quiet.warnings)


def test_stability_warnings_are_labelled_per_side() -> None:
    c = compare([100.0, 130.0, 70.0, 100.0, 100.0], [100.0] * 5, higher_is_better=True, label="dl", resamples=R)
    assert any(w.code == "high-cv" and w.message.startswith("dl baseline:") for w in c.warnings)
    assert not any(w.message.startswith("dl candidate:") for w in c.warnings)


def test_edge_cases_do_not_crash() -> None:
    empty = compare([], [1.0, 2.0, 3.0], higher_is_better=True, resamples=R)
    assert empty.verdict == "no significant change" and math.isnan(empty.p_value)
    assert any(w.code == "no-data" for w in empty.warnings)
    one = compare([1.0], [2.0], higher_is_better=True, resamples=R)
    assert one.verdict == "no significant change" and math.isnan(one.ci_low)
    # A baseline at 0: no relative change exists, so the comparison is absolute (+1 in the unit).
    zero_base = compare([0.0] * 5, [1.0] * 5, higher_is_better=True, resamples=R)
    assert zero_base.absolute and zero_base.change == 1.0 and zero_base.verdict == "better"
    same = compare([5.0] * 5, [5.0] * 5, higher_is_better=True, resamples=R)
    assert same.p_value == 1.0 and same.change == 0.0 and same.verdict == "no significant change"
    with pytest.raises(ValueError, match="threshold"):
        compare([1.0], [1.0], higher_is_better=True, threshold=-0.1)


def test_min_attainable_p_large_samples_do_not_overflow() -> None:
    from tunbench.stats import min_attainable_p

    assert min_attainable_p(600, 600) == 0.0 or min_attainable_p(600, 600) < 1e-300
    assert min_attainable_p(3, 3) == pytest.approx(0.1)


def test_a_bimodal_case_gets_its_verdict_from_its_interval() -> None:
    """Issue 28 item 1: 15 runs per side, bimodal. The change was the ratio of the medians (-2%), its CI the
    Hodges-Lehmann interval (about +840%..+900%), and the verdict took its direction from the point: "worse",
    exit 1. One estimator now gives the point and the interval, and the interval gives the direction."""
    rng = np.random.default_rng(1)
    b = np.r_[rng.normal(100, 1, 8), rng.normal(10, 0.1, 7)]
    c = np.r_[rng.normal(95, 1, 8), rng.normal(1000, 10, 7)]
    assert np.median(c) / np.median(b) - 1 < 0.0  # the old point estimate: a drop
    res = compare(b, c, higher_is_better=True)
    assert 0.0 < res.ci_low <= res.change <= res.ci_high
    assert res.p_value < 0.05
    assert res.verdict == "better" and not res.regressed
    absolute = compare(b, c, higher_is_better=True, absolute=True)
    assert absolute.ci_low <= absolute.change <= absolute.ci_high
