"""remote/spread.py: a fleet's clients shared among the client hosts by weight (largest remainder)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tunbench.remote.inventory import Host
from tunbench.remote.spread import shares, spread

BASE = Host("h", "h", None, None, None, (), None, None, frozenset({"client"}), "tunbench", "lab.ini:1")


def hosts(*weights: float) -> list[Host]:
    return [dataclasses.replace(BASE, name=f"h{k}", client_weight=w) for k, w in enumerate(weights, 1)]


def test_an_even_spread_gives_the_first_hosts_the_remainder_in_the_inventorys_order() -> None:
    out = spread(100, hosts(1, 1, 1))
    assert [(s.host.name, s.first, s.count) for s in out] == [("h1", 1, 34), ("h2", 35, 33), ("h3", 68, 33)]
    assert [i for s in out for i in s.indices] == list(range(1, 101))  # every client once, in order


def test_weights_share_in_proportion_and_ties_go_to_the_earlier_host() -> None:
    assert shares(10, [2, 1, 1]) == [5, 3, 2]  # exact 5, 2.5, 2.5: the one left over goes to h2
    assert shares(10, [1, 1, 2]) == [3, 2, 5]
    assert shares(7, [0.5, 3]) == [1, 6]  # exact 1.0, 6.0
    assert shares(100, [3, 1]) == [75, 25]


def test_hosts_given_no_client_are_left_out() -> None:
    out = spread(2, hosts(1, 1, 1))
    assert [(s.host.name, s.first, s.count) for s in out] == [("h1", 1, 1), ("h2", 2, 1)]
    assert [s.host.name for s in spread(3, hosts(1, 100))] == ["h2"]  # exact 0.03 and 2.97
    assert spread(0, hosts(1, 1)) == []


def test_no_client_host_is_an_error() -> None:
    with pytest.raises(ValueError, match="no client host"):
        shares(5, [])


def test_a_larger_fleet_can_give_a_host_fewer_clients() -> None:
    """Largest remainder is not monotone (the Alabama paradox): why preflight checks every client count."""
    assert shares(10, [6, 6, 2]) == [4, 4, 2]
    assert shares(11, [6, 6, 2]) == [5, 5, 1]


@given(
    n=st.integers(min_value=0, max_value=2000),
    weights=st.lists(st.floats(min_value=0.01, max_value=1000.0), min_size=1, max_size=12),
)
def test_shares_add_up_and_each_is_within_one_of_its_exact_share(n: int, weights: list[float]) -> None:
    counts = shares(n, weights)
    assert sum(counts) == n and all(c >= 0 for c in counts)
    total = sum(weights)
    assert all(abs(c - n * w / total) < 1 for c, w in zip(counts, weights, strict=True))
