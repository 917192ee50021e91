"""The run's time estimate comes from each workload's own idea of a trial's length."""

from __future__ import annotations

import pytest

from tunbench import workloads
from tunbench.units import Window
from tunbench.workloads.base import TRIAL_SETUP_S, Axes
from tunbench.workloads.fleet_options import ClientsOptions, StormOptions
from tunbench.workloads.rrul import RrulOptions
from tunbench.workloads.udp import UdpSearchOptions


def test_plain_workloads_take_their_window_plus_setup() -> None:
    iperf3 = workloads.get("iperf3")
    assert iperf3.estimate(Axes(direction="up"), iperf3.options(None), Window(10, 2)) == pytest.approx(
        12 + TRIAL_SETUP_S
    )


def test_rrul_counts_its_idle_phases() -> None:
    rrul = workloads.get("rrul")
    assert rrul.estimate(Axes(), RrulOptions(idle_s=3), Window(10, 2)) == pytest.approx(10 + 2 + 6 + TRIAL_SETUP_S)


def test_a_zero_loss_search_counts_every_step_of_every_size() -> None:
    search = workloads.get("udp-search")
    opts = UdpSearchOptions(sizes=[64, 1400], max_steps=5, step_s=2)
    assert search.estimate(Axes(), opts, Window(10, 2)) == pytest.approx(2 * 5 * 2.5 + TRIAL_SETUP_S)


def test_many_clients_grow_with_n_and_the_phases() -> None:
    clients = workloads.get("clients")
    one = clients.estimate(Axes(direction="up", clients=10), ClientsOptions(protocols=["udp"]), Window(5, 1))
    two = clients.estimate(Axes(direction="up", clients=10), ClientsOptions(protocols=["udp", "tcp"]), Window(5, 1))
    big = clients.estimate(Axes(direction="up", clients=500), ClientsOptions(protocols=["udp"]), Window(5, 1))
    assert two - one == pytest.approx(1 + 5 + 1 + 0.02 * 10)  # warm-up + window + the launch-spread pad
    assert big > one + 30  # 490 more clients' namespaces, keys and handshakes
    storm = workloads.get("storm")
    opts = StormOptions(variants=["connect", "reconnect", "overload"], overload_s=10)
    connect = storm.estimate(Axes(clients=100, variant="connect"), opts, Window(5, 1))
    assert storm.estimate(Axes(clients=100, variant="reconnect"), opts, Window(5, 1)) > connect
    assert storm.estimate(Axes(clients=100, variant="overload"), opts, Window(5, 1)) == pytest.approx(connect + 10)
