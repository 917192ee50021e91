"""Tests for tunbench.stats.checks (stability warnings) and the MAD outlier detector."""

from __future__ import annotations

import numpy as np
import pytest

from tunbench.stats import modified_z_scores, outliers, stability_warnings


def _codes(values: list[float]) -> list[str]:
    return [w.code for w in stability_warnings(values)]


def test_quiet_data_has_no_warnings() -> None:
    values = list(np.random.default_rng(1).normal(100.0, 0.5, 10))
    assert stability_warnings(values) == []


def test_high_cv_fires_with_message_and_fix() -> None:
    ws = stability_warnings([100.0, 91.0, 109.0], label="download/wireguard-go/50ms")
    cv = [w for w in ws if w.code == "high-cv"]
    assert len(cv) == 1
    assert cv[0].message.startswith("download/wireguard-go/50ms: CV 9.0% over 3 repetitions")
    assert "--repeat 10" in cv[0].fix and "pin CPUs" in cv[0].fix


@pytest.mark.parametrize(("cv", "fires"), [(0.008, False), (0.049, False), (0.051, True), (0.2, True)])
def test_high_cv_threshold(cv: float, fires: bool) -> None:
    d = np.array([0.0, 1.0, -1.0, 0.5, -0.5])
    x = 100.0 + d * (cv * 100.0 / d.std(ddof=1))  # mean 100, CV exactly `cv`
    assert x.std(ddof=1) / x.mean() == pytest.approx(cv)
    assert ("high-cv" in _codes(list(x))) is fires


@pytest.mark.parametrize(
    ("n", "code"),
    [
        (1, "too-few-repetitions"),
        (2, "too-few-repetitions"),
        (3, "few-for-significance"),
        (4, "few-for-significance"),
    ],
)
def test_repetition_count_warnings(n: int, code: str) -> None:
    ws = stability_warnings([100.0] * n)
    assert [w.code for w in ws] == [code]
    assert "--repeat 5" in ws[0].fix


def test_five_repetitions_are_enough() -> None:
    assert _codes([100.0] * 5) == []


def test_outlier_warning() -> None:
    ws = stability_warnings([100.0, 101.0, 99.0, 100.0, 150.0])
    out = [w for w in ws if w.code == "outlier"]
    assert len(out) == 1
    assert "50.0% away from the median 100" in out[0].message
    assert "[4]" in out[0].message  # the MAD detector names the repetition
    # 25 % away is below the 30 % threshold (CV fires, outlier does not).
    assert "outlier" not in _codes([100.0, 101.0, 99.0, 100.0, 125.0])


def test_mostly_zero_and_no_data_and_non_finite() -> None:
    assert "mostly-zero" in _codes([0.0, 0.0, 0.0, 5.0, 0.0])
    assert "mostly-zero" not in _codes([0.0, 5.0, 5.0, 5.0, 5.0])
    assert _codes([]) == ["no-data"]
    codes = _codes([100.0, float("nan"), 100.0, 100.0, 100.0, 100.0])
    assert codes == ["non-finite"]  # the 5 finite values are otherwise fine


def test_all_zero_does_not_crash() -> None:
    assert _codes([0.0] * 5) == ["mostly-zero"]


def test_outliers_detects_known_index() -> None:
    assert outliers([10.0, 10.2, 9.9, 10.1, 9.8, 30.0]) == [5]
    assert outliers([10.0, 10.2, 9.9, 10.1, 9.8, 10.3]) == []


def test_outliers_mad_zero_falls_back_to_mean_absolute_deviation() -> None:
    # MAD is 0 (four equal values); the fallback still flags the odd one out.
    assert outliers([5.0, 5.0, 5.0, 5.0, 100.0]) == [4]
    assert outliers([5.0] * 5) == []
    z = modified_z_scores([5.0, 5.0, 5.0, 5.0, 100.0])
    assert np.all(np.isfinite(z))


def test_outliers_small_and_invalid() -> None:
    assert outliers([]) == []
    assert outliers([1.0, 1000.0]) == []
    with pytest.raises(ValueError):
        outliers([1.0, 2.0, 3.0], threshold=0.0)


def test_modified_z_score_value() -> None:
    # median 3, |dev| = [2,1,0,1,2] -> MAD 1; z(5) = 0.6745 * 2 / 1
    z = modified_z_scores([1.0, 2.0, 3.0, 4.0, 5.0])
    assert z[4] == pytest.approx(0.6745 * 2.0)


def test_a_late_emulator_is_a_warning_with_its_worst_lateness() -> None:
    from tunbench.stats.checks import LINK_LATE_WARN_US, link_warnings

    assert link_warnings([]) == []
    assert link_warnings([64.0, LINK_LATE_WARN_US]) == []  # at the bound: the link kept its schedule
    (w,) = link_warnings([64.0, 45056.0, 1216.0], label="wireguard-go")
    assert w.code == "link-late"
    assert w.message.startswith("wireguard-go: ") and "45.1 ms" in w.message
    assert "CPU" in w.fix
