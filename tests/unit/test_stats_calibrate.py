"""stats/calibrate.py: an A/A calibration's noise and the MDE it projects per budget."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from tunbench.stats import min_detectable_effect_paired, noise_budget


def _aa(n: int, sd: float, seed: int, drift: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """n A/A pairs: a shared drift per pair (CV `drift`) and a within-pair log-ratio noise of SD `sd`."""
    rng = np.random.default_rng(seed)
    a = 4e9 * rng.lognormal(0.0, drift, n)
    return a, a * rng.lognormal(0.0, sd, n)


def test_noise_is_the_sd_of_the_within_pair_log_ratios_and_the_mde_is_compares() -> None:
    a, b = _aa(10, 0.04, seed=1)
    nb = noise_budget(a, b, pair_s=9.0, family=3)
    d = np.log(b / a)
    assert nb.n_pairs == 10 and nb.pair_sd == pytest.approx(float(np.std(d, ddof=1)))
    assert nb.level == pytest.approx(0.05 / 3)
    assert nb.mde == pytest.approx(min_detectable_effect_paired(nb.pair_sd, 10, confidence=1 - 0.05 / 3))
    # the shared drift (CV 5 %) is in a single trial's CV, not in the within-pair noise
    assert nb.trial_cv > nb.pair_sd
    lo, hi = nb.pair_sd_ci  # chi-square with 9 df: 0.688x to 1.826x
    assert lo / nb.pair_sd == pytest.approx(0.688, abs=0.001) and hi / nb.pair_sd == pytest.approx(1.826, abs=0.001)


def test_a_budget_buys_whole_pairs_after_the_overhead_and_the_mde_falls_as_one_over_sqrt_pairs() -> None:
    a, b = _aa(12, 0.03, seed=2)
    nb = noise_budget(a, b, pair_s=8.0, overhead_s=4.0, budgets_s=(60.0, 120.0, 800.0, 3204.0))
    assert [p.pairs for p in nb.projections] == [7, 14, 99, 400]
    big, bigger = nb.projections[2], nb.projections[3]
    assert bigger.mde / big.mde == pytest.approx(math.sqrt(99 / 400), rel=0.01)  # t quantiles ~ constant there
    assert all(p.mde > q.mde for p, q in zip(nb.projections, nb.projections[1:], strict=False))


def test_few_pairs_give_a_wide_finite_mde_and_a_projection() -> None:
    """The paired verdict is a t-test (issue 28 item 6): no floor, so 4 pairs give a finite MDE, wide
    because of the t quantile at 3 degrees of freedom and Holm's level 0.05 / 3."""
    a, b = _aa(4, 0.03, seed=3)
    nb = noise_budget(a, b, pair_s=10.0, family=3, budgets_s=(60.0, 600.0))
    assert math.isfinite(nb.mde) and math.isfinite(nb.projections[0].mde)
    assert nb.projections[0].mde > nb.projections[1].mde  # 6 pairs against 60
    assert nb.target_pairs >= 4 and nb.target_s == pytest.approx(nb.target_pairs * 10.0)


def test_one_pair_has_no_noise_estimate() -> None:
    nb = noise_budget([4e9], [4.1e9], pair_s=5.0)
    assert math.isnan(nb.pair_sd) and math.isnan(nb.mde) and math.isnan(nb.trial_cv)
    assert all(math.isnan(x) for x in nb.pair_sd_ci)
    assert nb.target_pairs == 0 and math.isnan(nb.target_s)
    assert all(math.isnan(p.mde) for p in nb.projections)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (([1.0, 2.0], [1.0]), {}, "as many"),
        (([1.0, -2.0], [1.0, 2.0]), {}, "> 0"),
        (([1.0, 2.0], [1.0, 2.0]), {"family": 0}, "family"),
        (([1.0, 2.0], [1.0, 2.0]), {"target": 0.0}, "target"),
        (([1.0, 2.0], [1.0, 2.0]), {"overhead_s": -1.0}, "overhead"),
    ],
)
def test_bad_input_is_refused(args: tuple[list[float], list[float]], kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        noise_budget(*args, pair_s=5.0, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pair_s"):
        noise_budget([1.0, 2.0], [1.0, 2.0], pair_s=0.0)


def test_the_projected_mde_is_detected_about_80_percent_of_the_time() -> None:
    """The projection's promise, simulated: calibrate on 200 pairs (an SD known well), project to a budget of
    12 pairs at Holm's level over 3 comparisons, then run 4,000 comparisons of 12 pairs whose true change is
    that MDE. compare's paired t should find it about 80 % of the time (the MDE is the t-test's formula; the
    SD is estimated in each comparison, so about, not exactly)."""
    a, b = _aa(200, 0.04, seed=4)
    nb = noise_budget(a, b, pair_s=10.0, family=3, budgets_s=(120.0,))
    (p,) = nb.projections
    assert p.pairs == 12
    rng = np.random.default_rng(5)
    d = rng.normal(math.log1p(p.mde), 0.04, size=(4000, p.pairs))
    power = float(np.mean(sps.ttest_1samp(d, 0.0, axis=1).pvalue < nb.level))
    assert 0.74 <= power <= 0.86, power
