"""Tests for tunbench.stats.fairness.jain_index."""

from __future__ import annotations

import math

import pytest

from tunbench.stats import jain_index


def test_all_equal_is_one() -> None:
    assert jain_index([5.0, 5.0, 5.0, 5.0]) == pytest.approx(1.0)


@pytest.mark.parametrize("n", [2, 3, 8])
def test_one_of_n_nonzero_is_one_over_n(n: int) -> None:
    assert jain_index([0.0] * (n - 1) + [42.0]) == pytest.approx(1.0 / n)


def test_known_value() -> None:
    # (1+2+3)^2 / (3 * (1+4+9)) = 36 / 42
    assert jain_index([1.0, 2.0, 3.0]) == pytest.approx(36.0 / 42.0)


def test_scale_invariant() -> None:
    assert jain_index([1e9, 2e9, 3e9]) == pytest.approx(jain_index([1.0, 2.0, 3.0]))


def test_edge_cases() -> None:
    assert math.isnan(jain_index([]))
    assert math.isnan(jain_index([0.0, 0.0]))
    assert jain_index([3.0]) == 1.0
    with pytest.raises(ValueError, match="non-negative"):
        jain_index([1.0, -1.0])
    with pytest.raises(ValueError):
        jain_index([1.0, float("nan")])
