"""The recovery workload's pure parts: irtt round trips -> probes, the emulator's schedule -> outages, and
the recovery figures from both."""

from __future__ import annotations

import pytest

from tunbench.link import mahimahi
from tunbench.link.profile import find_profile
from tunbench.workloads.recovery import (
    Probe,
    disruptions,
    measurable,
    probes,
    recovery_metrics,
    tcp_intervals,
    upload_trace_gaps,
)

MS = 1_000_000


def _rt(sent_ms: float, rx_ms: float | None, lost: str = "false") -> dict[str, object]:
    server = {"receive": {"wall": int(rx_ms * MS)}} if rx_ms is not None else {}
    return {"lost": lost, "timestamps": {"client": {"send": {"wall": int(sent_ms * MS)}}, "server": server}}


def test_irtt_round_trips_become_probes() -> None:
    doc = {
        "round_trips": [
            _rt(0, 1),
            _rt(10, None, "true"),
            _rt(20, 21, "true_down"),  # the server got it, the reply was lost
            {"lost": "false", "timestamps": {}},  # no send time: skipped
        ]
    }
    assert probes(doc) == [
        Probe(0, 1 * MS, True),
        Probe(10 * MS, None, False),
        Probe(20 * MS, 21 * MS, False),
    ]


def test_outages_come_from_the_applied_events() -> None:
    sched = {
        "start_ns": 5,
        "a2b": [
            {"event": 0, "kind": "set", "at_ns": 1 * MS, "late_ns": 0},
            {"event": 1, "kind": "down", "at_ns": 4000 * MS, "late_ns": 3},
            {"event": 1, "kind": "up", "at_ns": 7000 * MS, "late_ns": 2},
        ],
        "b2a": [],
    }
    assert disruptions(sched, 100) == [(100 + 4000 * MS, 100 + 7000 * MS)]
    assert disruptions({"a2b": [], "b2a": []}, 0) == []
    # event 0 (the "set" at 1 ms) is a rebind: it lasts no time
    assert disruptions(sched, 100, {0}) == [(100 + MS, 100 + MS), (100 + 4000 * MS, 100 + 7000 * MS)]


def test_recovery_figures_of_a_three_second_outage() -> None:
    # probes every 10 ms for 10 s, 1 ms one way; down from 4 s to 7 s, and the tunnel needs 120 ms after
    # the link's return before the first probe gets through (a handshake)
    plist = []
    for i in range(1000):
        t = i * 10.0
        through = t < 4000 or t >= 7120
        plist.append(Probe(int(t * MS), int((t + 1) * MS) if through else None, through))
    # TCP: 10 Mbit/s before, nothing during, 5 at first after, back to 9.5 from 7.6 s
    tcp = [
        (k / 10, 10e6 if k / 10 <= 4 else 0.0 if k / 10 <= 7.1 else 5e6 if k / 10 < 7.6 else 9.5e6)
        for k in range(1, 101)
    ]
    m = recovery_metrics(plist, (4000 * MS, 7000 * MS), tcp, tcp_start_ns=0)
    assert m["recovery.outage_ms"] == 3000
    assert m["recovery.probes_sent"] == 1000 and m["recovery.probes_lost"] == 312
    assert m["recovery.first_after_ms"] == pytest.approx(120)
    assert m["recovery.silence_ms"] == pytest.approx(7121 - 3991)
    assert m["recovery.tcp_before_bps"] == pytest.approx(10e6)
    assert m["recovery.tcp_90_ms"] == pytest.approx(600)
    assert m["recovery.tcp_survived"] == 1.0


def test_nothing_after_the_return_and_a_dead_flow_say_so() -> None:
    plist = [Probe(0, MS, True), Probe(4 * MS, 5 * MS, True), Probe(20 * MS, None, False)]  # sent before up
    m = recovery_metrics(plist, (5 * MS, 8 * MS), [(0.1, 1e6)], tcp_start_ns=0, tcp_error="connection reset")
    assert m["recovery.first_after_ms"] is None
    assert m["recovery.silence_ms"] == pytest.approx(15)  # from the last reception (5 ms) to the last send (20)
    assert m["recovery.tcp_survived"] == 0.0
    assert m["recovery.tcp_90_ms"] is None
    assert "recovery.tcp_90_ms" not in recovery_metrics(plist, (5 * MS, 8 * MS))
    # irtt stopped sending (the tunnel's device went away): silent to the planned end, the rest lost
    m = recovery_metrics(plist, (5 * MS, 8 * MS), until_ns=100 * MS, expected=10)
    assert m["recovery.silence_ms"] == pytest.approx(95)
    assert m["recovery.probes_lost"] == 8


def test_tcp_intervals_skip_omitted_ones() -> None:
    doc = {
        "intervals": [
            {"sum": {"end": 0.1, "bits_per_second": 1.0, "omitted": True}},
            {"sum": {"end": 0.2, "bits_per_second": 2.0, "omitted": False}},
            {"sum": {}},
        ]
    }
    assert tcp_intervals(doc) == [(0.2, 2.0)]


def test_a_traces_silences_are_the_gaps_of_a_tenth_of_a_second_or_more() -> None:
    assert mahimahi.gaps([1, 2, 50, 200, 201], 100) == [(50, 200)]
    assert mahimahi.gaps([1, 2, 3], 100) == []
    # 12 Mbit/s is one 1500-byte opportunity per ms; nothing for 2 ms, then 24 Mbit/s: two per ms
    assert mahimahi.opportunities([12e6, 12e6, 0, 0, 24e6]) == [1, 2, 5, 5]
    assert upload_trace_gaps(find_profile("lte-handover")) == [(6997, 7402)]


def test_which_profiles_the_recovery_workload_can_measure() -> None:
    assert measurable(find_profile("outage-3s")) and measurable(find_profile("nat-rebind"))
    assert measurable(find_profile("lte-handover"))
    assert not measurable(find_profile("wan-50ms")) and not measurable(find_profile("geo-rain-fade"))
