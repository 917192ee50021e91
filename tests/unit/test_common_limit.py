"""The `common-limit` warning: direct and several tunnels measuring the same number measured a limit none of
them owns (a per-flow cap between real hosts, a rate limit, the traffic generator)."""

from __future__ import annotations

import dataclasses

from tests.unit.report_data import trial
from tunbench.report.summary import summarize_trials
from tunbench.report.terminal import warning_lines
from tunbench.stats import common_limit_warning


def test_fires_only_when_direct_and_two_tunnels_tie() -> None:
    assert common_limit_warning({"direct": 1.00e9, "a": 0.99e9, "b": 0.985e9}) is not None
    assert common_limit_warning({"direct": 1.00e9, "a": 0.99e9}) is None  # one tunnel may tie by chance
    assert common_limit_warning({"direct": 1.00e9, "a": 0.99e9, "b": 0.90e9}) is None
    assert common_limit_warning({"direct": 1.00e9, "a": 0.0, "b": 1.0e9}) is None  # a failed case is no tie
    w = common_limit_warning({"direct": 1.00e9, "a": 0.99e9, "b": 0.98e9}, label="lan up")
    assert w is not None and w.message.startswith("lan up: direct and 2 tunnels all measured 980–1,000 Mbit/s")


def test_one_line_per_group_on_the_baseline_and_not_where_a_rate_is_set() -> None:
    tied = [trial(1, "direct", 9.4e8), trial(2, "wireguard-go", 9.35e8), trial(3, "openvpn", 9.3e8)]
    sums = summarize_trials(tied)
    flagged = {s.case.label: [w.code for w in s.warnings if w.code == "common-limit"] for s in sums}
    assert flagged == {"direct": ["common-limit"], "wireguard-go": [], "openvpn": []}
    assert sum("suspiciously identical" in ln for ln in warning_lines(sums)) == 1

    def rated(t):  # type: ignore[no-untyped-def]
        return dataclasses.replace(t, params={**t.params, "profile": {"up": {"rate": "1gbit"}, "down": {}}})

    sums = summarize_trials([rated(t) for t in tied])
    assert not [w for s in sums for w in s.warnings if w.code == "common-limit"]
    spread = [trial(1, "direct", 9.4e8), trial(2, "wireguard-go", 7e8), trial(3, "openvpn", 4e8)]
    assert not [w for s in summarize_trials(spread) for w in s.warnings if w.code == "common-limit"]
