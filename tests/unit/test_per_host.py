"""Per-host figures of a fleet over several client hosts: their names, and the report's per-host rows."""

from __future__ import annotations

import pytest

from tunbench.remote.inventory.model import Host
from tunbench.remote.spread import shares, spread
from tunbench.report.headlines import host_rows
from tunbench.report.summary import trial_warnings
from tunbench.results import TrialRecord
from tunbench.workloads.base import Column
from tunbench.workloads.fleet_metrics import FIRST_STORM
from tunbench.workloads.per_host import by_host, host_key
from tunbench.workloads.storm import ready_metrics


def host(name: str, weight: float = 1.0) -> Host:
    return Host(
        name, name, None, None, None, (), None, None, frozenset({"client"}), "tunbench", "x:1", client_weight=weight
    )


def test_host_key_names_a_per_host_twin_of_clients_metrics_only() -> None:
    assert host_key("clients.udp.aggregate_bps", "h2") == "clients.host.h2.udp.aggregate_bps"
    assert host_key("throughput_bps", "h2") is None
    assert host_key("clients.host.h2.ready_s", "h3") is None  # already a host's
    assert by_host({1: "a", 2: "b", 3: "a"}, {1: 1.0, 2: 2.0, 3: 3.0}) == {"a": {1: 1.0, 3: 3.0}, "b": {2: 2.0}}


@pytest.mark.parametrize(
    ("n", "weights", "want"),
    [
        (100, [1, 1, 1], [34, 33, 33]),
        (90, [2, 1, 1], [45, 23, 22]),
        (5, [1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]),
        (0, [1], [0]),
    ],
)
def test_shares_add_up_and_follow_the_weights(n: int, weights: list[float], want: list[int]) -> None:
    got = shares(n, weights)
    assert got == want and sum(got) == n
    exact = [n * w / sum(weights) for w in weights]
    assert all(abs(g - e) < 1 for g, e in zip(got, exact, strict=True))


def test_spread_hands_out_contiguous_indices_and_leaves_out_empty_hosts() -> None:
    got = spread(4, [host("a"), host("b", 2.0), host("c", 0.1)])
    assert [(s.host.name, list(s.indices)) for s in got] == [("a", [1]), ("b", [2, 3, 4])]


def test_ready_metrics_of_one_host_and_of_a_first_storm() -> None:
    m = ready_metrics("", {1: 10.5, 2: 11.0}, {1: 0.1, 2: 0.2}, 10.0, 3, host="h2")
    assert m["clients.host.h2.ready_count"] == 2 and m["clients.host.h2.failed_count"] == 1
    assert m["clients.host.h2.ready_max_s"] == pytest.approx(1.0)
    assert m["clients.host.h2.ready_from_launch_p50_s"] == pytest.approx(0.6)
    first = ready_metrics(FIRST_STORM, {1: 10.5}, {1: 0.1}, 10.0, 1, host="h2.lab")
    assert first["clients.host.h2.lab.connect.ready_p99_s"] == pytest.approx(0.5)
    assert set(ready_metrics(FIRST_STORM, {}, {}, 10.0, 1)) == {k.replace("host.h2.lab.", "") for k in first}


def rec(metrics: dict[str, float | None], hosts: tuple[str, ...] = ()) -> TrialRecord:
    params = {"net": {"clients": {"hosts": dict.fromkeys(hosts, 1)}}}
    return TrialRecord(1, "x", "x", "lan", "storm", 1, "up", 0, params, metrics=metrics)


def test_host_rows_show_each_hosts_own_figures_and_blank_where_there_are_none() -> None:
    cols = [Column("ready", "clients.ready_count", "n"), Column("srv CPU-s", "clients.server_cpu_s", "sec")]
    m = {"clients.ready_count": 3.0, "clients.server_cpu_s": 1.0, "clients.host.h2.ready_count": 2.0}
    # a reconnect storm's first phase is not a host of its own (h2.connect): only the hosts the trial records
    m |= {"clients.host.h3.ready_count": 1.0, "clients.host.h2.connect.ready_count": 2.0}
    assert host_rows([rec(m, ("h2", "h3"))], cols) == [("h2", ["2", ""]), ("h3", ["1", ""])]
    assert host_rows([rec({"clients.ready_count": 3.0})], cols) == []  # one machine: no sub-rows
    assert host_rows([rec(m, ("h2",))], cols) == []  # one client host: the total is its row


def test_a_storm_that_started_further_apart_than_its_tolerance_is_warned_about() -> None:
    ok = rec(
        {"clients.start_skew_s": 0.002, "clients.start_skew_uncertainty_s": 0.001, "clients.start_tolerance_s": 0.05}
    )
    late = rec(
        {"clients.start_skew_s": 0.049, "clients.start_skew_uncertainty_s": 0.002, "clients.start_tolerance_s": 0.05}
    )
    assert not [w for w in trial_warnings([ok], "x") if w.code == "start-skew"]
    (w,) = [w for w in trial_warnings([ok, late], "x") if w.code == "start-skew"]
    assert "49.0 ms apart in 1 of 2" in w.message
