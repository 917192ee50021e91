"""A client host lost mid-trial (--hosts): its share of a fleet marked with why, the run's summary and the
per-host split leaving it out; a lost host's batch and readiness answered without raising; and the
connect workload's time estimate growing with the client hosts it takes turns on (pure parts)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.fakesite import fake_tunnel
from tunbench.link.profile import Profile
from tunbench.plan import Case, PlannedTrial
from tunbench.remote.protocol import HostLost
from tunbench.report.summary import lost_text, trial_warnings
from tunbench.results import TrialRecord
from tunbench.session.size import expected_s
from tunbench.sites.hosts_ready import HostsReadyProbe
from tunbench.trial.fleet import mark_lost
from tunbench.units import Window
from tunbench.workloads.base import Measurement
from tunbench.workloads.per_host import lost_indices, without


def test_a_lost_hosts_clients_are_marked_with_why() -> None:
    result = Measurement()
    mark_lost(result, {"h4": "h4: connection closed"}, {"h2": 12, "h3": 12, "h4": 12})
    assert result.params["clients_lost"] == {"h4": {"clients": 12, "reason": "h4: connection closed"}}
    assert result.metrics["clients.lost"] == 12.0
    untouched = Measurement()
    mark_lost(untouched, {}, {"h2": 12})
    assert untouched.params == {} and untouched.metrics == {}


def test_a_lost_hosts_share_is_left_out() -> None:
    host_of = {1: "h2", 2: "h3", 3: "h4", 4: "h2", 5: "h3", 6: "h4"}
    gone = lost_indices(host_of, {"h4": "gone"})
    assert gone == {3, 6}
    assert without({1: 0.5, 3: 0.7, 6: 0.9}, gone) == {1: 0.5}


def test_the_summary_names_the_lost_host_its_clients_and_why() -> None:
    lost = {"h4": {"clients": 12, "reason": "h4: the channel ended\nssh said: ..."}}
    assert lost_text(lost) == "host h4 (12 clients): h4: the channel ended"
    t = TrialRecord(1, "wg", "wg", "lan", "storm", 1, "-", 1, {"clients_lost": lost}, clients=36)
    (w,) = [w for w in trial_warnings([t, TrialRecord(2, "wg", "wg", "lan", "storm", 1, "-", 2, {})], "wg 36")]
    assert w.code == "clients-lost"
    assert "1 of 2 trial(s): host h4 (12 clients): h4: the channel ended" in w.message


class _Probe:
    def __init__(self, lost: bool, ready: dict[int, float]) -> None:
        self.lost, self.ready_at = lost, ready

    def watch(self, keys: Any) -> None:
        if self.lost:
            raise HostLost("h4: not connected", "h4")

    def wait(self, keys: Any, deadline: float) -> bool:
        if self.lost:
            raise HostLost("h4: not connected", "h4")
        return True


def test_a_lost_hosts_probe_answers_not_ready_and_the_others_are_kept() -> None:
    probes: dict[str, Any] = {"h2": (_Probe(False, {1: 5.0}), {1}), "h4": (_Probe(True, {}), {2})}
    probe = HostsReadyProbe(probes)
    probe.watch([1, 2])
    assert probe.wait([1, 2], 0.0) is False
    assert probe.wait([1], 0.0) is True
    assert probe.ready_at == {1: 5.0}


def test_connects_estimate_grows_with_the_client_hosts() -> None:
    case = Case.of(fake_tunnel("a"), Profile(name="lan", emulated=False), "connect")
    pt = PlannedTrial(1, case, 1)
    one = expected_s(pt, {}, Window(2, 1))
    assert expected_s(pt, {}, Window(2, 1), machines=3) == pytest.approx(3 * one)
    iperf = PlannedTrial(1, Case.of(fake_tunnel("a"), Profile(name="lan", emulated=False), "iperf3", 1, "up"), 1)
    assert expected_s(iperf, {}, Window(2, 1), machines=3) == expected_s(iperf, {}, Window(2, 1))
