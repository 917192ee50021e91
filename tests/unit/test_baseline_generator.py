"""The direct baseline's traffic from several iperf3 processes: how many, their results merged into one,
and the line that says so under the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunbench.report.common import baseline_line
from tunbench.results import TrialRecord
from tunbench.workloads.iperf3 import Iperf3Options, Iperf3Workload, merge, parse

DATA = Path(__file__).parent.parent / "data"


def test_merge_sums_throughput_bytes_and_intervals_and_keeps_the_busiest_cpu() -> None:
    one = parse((DATA / "iperf3-up-1flow.json").read_text(), "up")
    two = merge([one, one])
    assert two.throughput_bps == pytest.approx(2 * one.throughput_bps)
    assert two.up_bps == pytest.approx(2 * (one.up_bps or 0.0))
    assert two.received_bytes["up"] == pytest.approx(2 * one.received_bytes["up"])
    assert len(two.streams) == 2 * len(one.streams)
    assert len(two.intervals) == len(one.intervals)
    assert two.intervals[0].bps == pytest.approx(2 * one.intervals[0].bps)
    assert two.cpu_client_pct == one.cpu_client_pct
    assert merge([one]) is one


class _Ctx:
    def __init__(self, baseline: bool, options: Iperf3Options) -> None:
        self.baseline = baseline
        self.options = options


@pytest.mark.parametrize(
    ("baseline", "opts", "expected"),
    [
        (False, Iperf3Options(), 1),  # a tunnel: one process, as a user runs iperf3
        (True, Iperf3Options(baseline_processes=3), 3),
        (True, Iperf3Options(rate="200mbit", baseline_processes=3), 1),  # a fixed load needs no more
        (True, Iperf3Options(baseline_processes=1), 1),
    ],
)
def test_only_the_baseline_at_full_speed_spreads_its_generator(
    baseline: bool, opts: Iperf3Options, expected: int
) -> None:
    assert Iperf3Workload().processes(_Ctx(baseline, opts)) == expected  # type: ignore[arg-type]


def test_auto_is_one_process_per_cpu_at_most_four() -> None:
    import os

    n = Iperf3Workload().processes(_Ctx(True, Iperf3Options()))  # type: ignore[arg-type]
    assert n == min(4, len(os.sched_getaffinity(0)))


def _trial(tunnel: str, processes: int) -> TrialRecord:
    gen = {"program": "iperf3", "version": "iperf 3.12", "processes": processes, "flows": processes}
    return TrialRecord(0, tunnel, tunnel, "lan", "iperf3", 1, "up", 1, {"generator": gen})


def test_the_table_says_when_the_baseline_was_generated_otherwise() -> None:
    assert baseline_line([_trial("direct", 1), _trial("socat", 1)]) == ""
    line = baseline_line([_trial("direct", 2), _trial("socat", 1)])
    assert "2 iperf3 processes" in line and "iperf 3.12" in line and "the tunnels: one iperf3 process" in line


def test_the_baseline_line_names_the_records_own_generator() -> None:
    """The report names no workload: the program and the config table come from the trials' records."""
    gen = {"program": "iperf", "version": "iperf 2.1.9", "processes": 3, "flows": 3}
    direct = TrialRecord(0, "direct", "direct", "lan", "iperf2", 1, "up", 1, {"generator": gen})
    line = baseline_line([direct])
    assert "3 iperf processes" in line and "one iperf process ([workload.iperf2] baseline_processes)" in line
    assert "iperf3" not in line
