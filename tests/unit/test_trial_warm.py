"""A warm block on the fake site: each tunnel up once, its windows in order, a void window measured again on
the same tunnel, a failed or dead tunnel failing only its own later windows, and everything torn down when
the block ends, interrupted or not."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.fakesite import DIES, Bench
from tunbench.errors import CommandFailed, DependencyMissing, TrialError
from tunbench.results import TrialRecord
from tunbench.runner import MAX_ATTEMPTS
from tunbench.sites.base import Pair
from tunbench.tunnels.tunnel import Tunnel
from tunbench.workloads.base import Context


@pytest.fixture
def bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bench]:
    b = Bench(tmp_path, monkeypatch, interfered=True)
    yield b
    b.close()


def by_label(recs: list[TrialRecord]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in recs:
        out.setdefault(r.label, []).append(r.status)
    return out


def test_each_tunnel_comes_up_once_and_serves_its_windows_in_order(bench: Bench) -> None:
    recs = bench.warm(["a", "b"], windows=3)
    assert [r.seq for r in recs] == [1, 2, 3, 4, 5, 6] and by_label(recs) == {"a": ["ok"] * 3, "b": ["ok"] * 3}
    assert bench.script.entered("pair") == ["pair t1w", "pair t2w"]  # one bring-up per tunnel
    assert bench.script.entered("servers") == ["servers"] * 6  # the workload's servers per window
    assert [r.params["warm"]["bringup"] for r in recs] == ["t1w", "t2w"] * 3
    assert [("setup_s" in r.metrics) for r in recs] == [True, True, False, False, False, False]
    assert all(r.params["site"] == "fake" for r in recs)  # what the bring-up recorded, on every window
    assert bench.script.open() == []


def test_a_tunnel_that_does_not_come_up_fails_its_own_windows_only(bench: Bench) -> None:
    bench.script_steps(tunnel=[CommandFailed(["tunnel"], 2, "RTNETLINK answers: no route")])
    recs = bench.warm(["a", "b"], windows=2)
    assert by_label(recs) == {"a": ["failed", "failed"], "b": ["ok", "ok"]}
    for r in recs[::2]:
        assert r.error.startswith("the warm bring-up t1w failed: a: ") and "no route" in r.error
    assert bench.script.entered("pair") == ["pair t1w", "pair t2w"] and bench.script.open() == []


def test_a_tunnel_that_dies_fails_its_later_windows_and_no_other(bench: Bench) -> None:
    bench.script_steps(measure=[None, DIES])  # b's first window: its tunnel exits during it
    recs = bench.warm(["a", "b"], windows=3)
    assert by_label(recs) == {"a": ["ok"] * 3, "b": ["failed"] * 3}
    assert "process exited (code 1)" in recs[1].error
    assert all(r.error.startswith("the tunnel of t2w died in an earlier window: ") for r in recs[3::2])
    measured = [e for e in bench.script.journal if e.startswith("measure")]
    assert len(measured) == 4  # b's later windows were not measured on a dead tunnel
    assert bench.script.open() == []


def test_a_workload_error_fails_one_window_and_the_tunnel_serves_the_next(bench: Bench) -> None:
    bench.script_steps(measure=[TrialError("iperf3: the server is busy")])
    recs = bench.warm(["a"], windows=2)
    assert [(r.status, r.error) for r in recs] == [("failed", "iperf3: the server is busy"), ("ok", "")]
    assert "log/server.log" in recs[0].artifacts and "retried" not in recs[0].params


def test_a_bug_of_ours_in_a_window_is_an_internal_error_with_its_traceback(bench: Bench) -> None:
    bench.script_steps(measure=[KeyError("rtt")])
    recs = bench.warm(["a"], windows=2)
    assert recs[0].error == "internal error: KeyError: 'rtt'" and b"KeyError" in recs[0].artifacts["traceback.txt"]
    assert recs[1].status == "ok"


def test_a_void_window_is_measured_again_on_the_same_tunnel(bench: Bench) -> None:
    bench.script_steps(watched=[{"interfered": 1.0}, None])
    recs = bench.warm(["a"], windows=2)
    assert [r.status for r in recs] == ["ok", "ok"]
    assert len(recs[0].params["retried"]) == 1 and "retried" not in recs[1].params
    assert recs[0].metrics["interfered"] == 0.0
    assert bench.script.entered("pair") == ["pair t1w"] and bench.script.entered("servers") == ["servers"] * 3


def test_void_windows_are_measured_at_most_max_attempts_times(bench: Bench) -> None:
    bench.script_steps(watched=[{"interfered": 1.0}] * MAX_ATTEMPTS)
    recs = bench.warm(["a"], windows=2)
    assert recs[0].status == "failed" and recs[0].error.startswith("interfered: a scripted neighbour")
    assert recs[0].params["retried"] == [recs[0].error] * (MAX_ATTEMPTS - 1)  # the last one was not retried
    assert len(bench.script.entered("servers")) == MAX_ATTEMPTS + 1
    assert recs[1].status == "ok"  # a void window says nothing against the tunnel


@pytest.mark.parametrize(("step", "when"), [("tunnel", 1), ("measure", 2), ("pair", 1)])
def test_an_interrupt_tears_down_every_tunnel_of_the_block(bench: Bench, step: str, when: int) -> None:
    bench.script_steps(**{step: [None] * when + [KeyboardInterrupt()]})
    with pytest.raises(KeyboardInterrupt):
        bench.warm(["a", "b"], windows=2)
    assert bench.script.open() == [] and bench.ledger.paths == []


def test_a_failed_bring_up_keeps_its_logs_with_each_window_it_fails(bench: Bench) -> None:
    bench.script_steps(tunnel=[CommandFailed(["tunnel"], 2, "RTNETLINK answers: no route")])
    recs = bench.warm(["a"], windows=2)
    for r in recs:
        assert b"fake server started" in r.artifacts["log/server.log"]  # as a failed cold trial keeps them
        assert "--- server.log:" not in r.error  # not pasted into the error, at a size of its own


def test_a_bug_in_a_bring_up_fails_its_windows_as_an_internal_error(bench: Bench) -> None:
    bench.script_steps(pair=[AttributeError("'NoneType' object has no attribute 'ns'")])
    recs = bench.warm(["a"], windows=2)
    for r in recs:
        assert (
            r.error
            == "the warm bring-up t1w failed: internal error: AttributeError: 'NoneType' object has no attribute 'ns'"
        )
        assert b"AttributeError" in r.artifacts["traceback.txt"]
    assert bench.script.open() == []


def test_a_window_measured_again_keeps_only_the_last_attempt(bench: Bench) -> None:
    @contextlib.contextmanager
    def hook(ctx: Context, tunnel: Tunnel, rec: TrialRecord, pair: Pair) -> Iterator[None]:
        rec.params.setdefault("hooked", []).append(len(bench.script.entered("servers")))
        yield

    bench.setup = dataclasses.replace(bench.setup, hooks=(hook,))
    bench.script_steps(watched=[{"interfered": 1.0}, None])
    recs = bench.warm(["a"], windows=1)
    assert recs[0].params["hooked"] == [2]  # the second attempt's record, not the void one's added to


@pytest.mark.parametrize(
    "error",
    [
        TrialError("iperf3: the server is busy"),
        CommandFailed(["iperf3"], 1, "unable to connect"),
        DependencyMissing("irtt is not installed"),
        KeyError("rtt"),
    ],
    ids=["trial", "command", "dependency", "bug"],
)
def test_a_window_fails_as_a_cold_trial_does(bench: Bench, error: Exception) -> None:
    bench.script_steps(measure=[error])
    cold = bench.cold()
    bench.script_steps(measure=[error])
    window = bench.warm(["a"], windows=1)[0]
    assert (window.status, window.error) == (cold.status, cold.error) == ("failed", window.error)
    assert set(window.artifacts) == set(cold.artifacts)
