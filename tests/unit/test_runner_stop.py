"""The runner's stop check (session.execute(stop=...)): asked only between blocks, so a run it ends keeps whole
blocks (complete pairs); the Deadline check stops before a block that would overrun."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tunbench import workloads
from tunbench.host import ledger as state
from tunbench.link.profile import find_profile
from tunbench.plan import PlannedTrial, expand, interleave
from tunbench.results import TrialRecord
from tunbench.runner import Deadline, Runner
from tunbench.sites.local import LocalSite
from tunbench.store.db import Store
from tunbench.trial.attempt import Setup
from tunbench.tunnels.registry import parse_ref
from tunbench.units import Window
from tunbench.workloads.base import BringupContext, Measurement, Workload


class Instant(Workload[BringupContext]):
    """Owns its bring-up and brings nothing up (no namespaces needed): every trial is ok at once."""

    kind = "instant"
    description = "test double for the runner"
    owns_bringup = True

    def measure(self, ctx: BringupContext) -> Measurement:
        return Measurement(metrics={"throughput_bps": 1.0})


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runner]:
    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(workloads, "get", lambda kind: Instant())
    store = Store(tmp_path / "r.db")
    run_id = store.create_run(
        uid="tbabc123", name="t", tunbench_version="0", provenance={}, scenario_text="", scenario_hash="", scenario={}
    )
    ledger = state.Ledger.open("tbabc123")
    yield Runner(Setup(ledger, LocalSite(ledger), Window(1, 0)), store, run_id)
    store.close()


def plan(repeat: int) -> list[PlannedTrial]:
    """Two labels of one tunnel and one case: one block (a pair) per round."""
    tunnels = [parse_ref("direct[label=a]"), parse_ref("direct[label=b]")]
    return interleave(expand(tunnels, [find_profile("lan")], [1], ["up"], ["iperf3"]), repeat, seed=3)


def records(n: int) -> list[TrialRecord]:
    return [TrialRecord(i, "direct", "x", "lan", "instant", 1, "up", 1, {}) for i in range(1, n + 1)]


def test_the_stop_check_is_asked_between_blocks_only_and_ends_the_run_there(runner: Runner) -> None:
    asked: list[tuple[list[int], int]] = []

    def stop(block: list[PlannedTrial], done: list[TrialRecord]) -> str:
        asked.append(([t.seq for t in block], len(done)))
        return "enough" if len(done) >= 4 else ""

    runner.stop = stop
    records = runner.run(plan(5))
    # asked before the 2nd and 3rd blocks, with that block's trials and whole blocks done; never mid-block
    assert asked == [([3, 4], 2), ([5, 6], 4)]
    assert [r.seq for r in records] == [1, 2, 3, 4]
    assert runner.stopped == "enough"
    assert sorted((r.repetition, r.label) for r in records) == [(1, "a"), (1, "b"), (2, "a"), (2, "b")]


def test_without_a_reason_to_stop_the_whole_plan_runs(runner: Runner) -> None:
    runner.stop = lambda block, done: ""
    assert len(runner.run(plan(3))) == 6 and runner.stopped == ""


def test_a_plan_without_block_numbers_is_never_cut(runner: Runner) -> None:
    # PlannedTrial.block defaults to 0: the whole plan is one block, so there is no boundary to stop at
    trials = [PlannedTrial(pt.seq, pt.case, pt.repetition) for pt in plan(3)]
    runner.stop = lambda block, done: "stop"
    assert len(runner.run(trials)) == 6 and runner.stopped == ""


def test_deadline_stops_before_a_block_that_would_overrun(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr("tunbench.runner.time.monotonic", lambda: clock[0])
    d = Deadline(130.0, min_blocks=2)  # since t = 100
    pair = plan(1)
    done = records(8)
    clock[0] = 105.0  # one pair in 5 s; the minimum of 2 blocks is not reached yet
    assert d(pair, done[:2]) == ""
    clock[0] = 125.0  # 4 trials in 25 s: the next pair needs 12.5 s, 5 s are left
    why = d(pair, done[:4])
    assert why.startswith("deadline: 5 s left, a block takes about 12 s")
    d2 = Deadline(130.0, min_blocks=1)  # since t = 125
    clock[0] = 129.0  # a pair in 4 s; 1 s left
    assert d2(pair, done[:2])
    clock[0] = 127.0
    d3 = Deadline(140.0)  # since t = 127
    clock[0] = 131.0  # a pair in 4 s, 9 s left: go on
    assert d3(pair, done[:2]) == ""


def test_deadline_never_stops_before_its_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr("tunbench.runner.time.monotonic", lambda: clock[0])
    d = Deadline(1.0, min_blocks=3)
    done = records(6)
    clock[0] = 50.0  # long past the deadline
    assert d(plan(1), done[:2]) == "" and d(plan(1), done[:4]) == ""
    assert d(plan(1), done[:6]) != ""
