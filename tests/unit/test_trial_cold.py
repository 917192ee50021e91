"""The cold trial shapes (pair, fleet, bring-ups) run end to end through the runner on the fake site: what a
failure records, what is tried again, what propagates, and that everything a trial entered is exited."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.fakesite import DIES, Bench, BringupWork, FleetWork, PairWork, fake_tunnel
from tunbench.errors import CommandFailed, RetryTrial, TrialError, TunnelError
from tunbench.link.profile import find_profile
from tunbench.plan import Case, PlannedTrial
from tunbench.runner import MAX_ATTEMPTS, Deadline, Runner, StopRun
from tunbench.trial import bringups, cold, fleet, pair


@pytest.fixture
def bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bench]:
    b = Bench(tmp_path, monkeypatch, interfered=True)
    yield b
    b.close()


def failing_command(output: str) -> CommandFailed:
    return CommandFailed(["tunnel", "198.19.0.1"], 2, output, what="fake client.before")


def test_cold_dispatches_each_workload_to_its_shape(bench: Bench) -> None:
    assert cold.shape(bench.setup.workload(bench.trial())[0]) is pair.measure
    assert cold.shape(FleetWork(bench.script)) is fleet.measure
    assert cold.shape(BringupWork(bench.script)) is bringups.measure
    assert cold.shape(PairWork(bench.script)) is pair.measure


def test_a_pair_trial_runs_its_lifecycle_in_order_and_tears_it_all_down(bench: Bench) -> None:
    rec = bench.cold()
    assert rec.status == "ok", rec.error
    assert rec.metrics["throughput_bps"] == 1e9 and rec.metrics["setup_s"] is not None
    assert rec.params["site"] == "fake" and "retried" not in rec.params
    j = bench.script.journal
    order = ["+pair t1", "tunnel 198.19.0.1", "+servers", "+counters", "+watched", "+sampling", "schedule"]
    order += ["measure 198.19.0.1", "-sampling", "-watched", "-counters", "-servers", "-pair t1"]
    assert [e for e in j if e in order] == order
    assert bench.script.open() == []  # every daemon stopped, every context exited
    assert "log/server.log" not in rec.artifacts  # an ok trial keeps no logs (its workload does not ask)


def test_a_tunnel_that_does_not_come_up_fails_its_trial_once_with_its_logs(bench: Bench) -> None:
    bench.script_steps(tunnel=[failing_command("RTNETLINK answers: no route")])
    rec = bench.cold()
    assert rec.status == "failed" and rec.error.startswith("a: ")  # the Tunnel names itself by its label
    assert "no route" in rec.error and "--- server log" in rec.error
    assert b"fake server started" in rec.artifacts["log/server.log"]
    assert "retried" not in rec.params and bench.script.entered("pair") == ["pair t1"]
    assert not [e for e in bench.script.journal if e.startswith("measure")]
    assert bench.script.open() == []


def test_a_pair_that_cannot_be_brought_up_fails_its_trial(bench: Bench) -> None:
    bench.script_steps(pair=[failing_command("ip: File exists")])
    rec = bench.cold()
    assert rec.status == "failed" and "ip: File exists" in rec.error
    assert bench.script.procs == [] and bench.script.open() == []


def test_a_workload_error_is_recorded_and_not_retried(bench: Bench) -> None:
    bench.script_steps(measure=[TrialError("iperf3: the server is busy"), None])
    rec = bench.cold()
    assert (rec.status, rec.error) == ("failed", "iperf3: the server is busy")
    assert "traceback.txt" not in rec.artifacts and "retried" not in rec.params
    assert bench.script.entered("pair") == ["pair t1"] and bench.script.open() == []
    assert set(rec.artifacts) == {"log/client.log", "log/server.log"}  # a failed trial keeps its logs


def test_a_bug_of_ours_is_an_internal_error_with_its_traceback(bench: Bench) -> None:
    bench.script_steps(measure=[ZeroDivisionError("division by zero")])
    rec = bench.cold()
    assert rec.status == "failed" and rec.error == "internal error: ZeroDivisionError: division by zero"
    assert b"ZeroDivisionError" in rec.artifacts["traceback.txt"]
    assert bench.script.open() == []


def test_a_tunnel_that_dies_in_its_window_fails_the_trial(bench: Bench) -> None:
    bench.script_steps(measure=[DIES])
    rec = bench.cold()
    assert rec.status == "failed" and "process exited (code 1)" in rec.error
    assert "throughput_bps" not in rec.metrics and "retried" not in rec.params
    assert bench.script.open() == []


def test_an_interfered_window_is_measured_again_from_scratch(bench: Bench) -> None:
    bench.script_steps(watched=[{"interfered": 1.0}, None])
    rec = bench.cold()
    assert rec.status == "ok" and rec.error == ""
    assert rec.metrics["interfered"] == 0.0 and rec.params["interference"] == ""  # the second attempt's
    assert len(rec.params["retried"]) == 1 and "a scripted neighbour" in rec.params["retried"][0]
    assert bench.script.entered("pair") == ["pair t1", "pair t1r2"]  # the retry has names of its own
    assert bench.script.open() == []


def test_void_windows_are_measured_at_most_max_attempts_times(bench: Bench) -> None:
    bench.script_steps(watched=[{"interfered": 1.0}] * (MAX_ATTEMPTS + 2))
    rec = bench.cold()
    assert rec.status == "failed" and rec.error.startswith("interfered: a scripted neighbour")
    assert len(bench.script.entered("pair")) == MAX_ATTEMPTS
    assert rec.params["retried"] == [rec.error] * (MAX_ATTEMPTS - 1)
    assert bench.script.open() == []


def test_a_window_voided_as_the_budget_runs_out_is_kept_interfered_and_the_budget_stops_the_run(
    bench: Bench,
) -> None:
    policy = dataclasses.replace(bench.setup.redo, until=time.monotonic())  # no time for another attempt
    setup = dataclasses.replace(bench.setup, redo=policy)
    runner = Runner(setup, bench.store, bench.run_id, stop=Deadline(time.monotonic()))
    bench.script_steps(watched=[{"interfered": 1.0}, None])
    first, second = bench.trial(seq=1), dataclasses.replace(bench.trial(seq=2), block=1)
    (rec,) = runner.run([first, second])
    assert rec.status == "ok" and rec.error == "" and "retried" not in rec.params  # not failed, not measured again
    assert rec.metrics["interfered"] == 1.0 and rec.params["interference"] == "a scripted neighbour"
    assert runner.stopped.startswith("deadline: ")  # as a budget stop ends a run: exit 0, whole blocks kept
    assert bench.script.entered("pair") == ["pair t1"] and bench.script.open() == []


@pytest.mark.parametrize(
    ("kind", "step"),
    [
        (PairWork.kind, "pair"),
        (PairWork.kind, "tunnel"),
        (PairWork.kind, "measure"),
        (FleetWork.kind, "fleet"),
        (FleetWork.kind, "measure"),
        (BringupWork.kind, "bare_pair"),
        (BringupWork.kind, "measure"),
    ],
)
def test_an_interrupt_propagates_and_everything_entered_is_exited(bench: Bench, kind: str, step: str) -> None:
    bench.script_steps(**{step: [KeyboardInterrupt()]})
    with pytest.raises(KeyboardInterrupt):
        bench.runner.run([bench.trial(kind)])
    assert bench.stored() == []  # nothing half-measured is stored
    assert bench.script.open() == []
    assert bench.ledger.paths == []  # the trial's directory is gone too


def test_a_lost_host_stops_the_run_after_the_trial_that_found_out(bench: Bench) -> None:
    bench.script_steps(lost=[[], ["h2"]])
    trials = [bench.trial(seq=n) for n in (1, 2, 3)]
    with pytest.raises(StopRun, match="the connection to h2 was lost"):
        bench.runner.run(trials)
    assert [r.seq for r in bench.stored()] == [1, 2]  # the trial that found out is stored, the next not run
    assert bench.script.open() == []


def test_a_fleet_trial_runs_in_the_site_fleet_and_leaves_it(bench: Bench) -> None:
    rec = bench.cold(FleetWork.kind)
    assert rec.status == "ok", rec.error
    assert rec.params["fleet"] == {"clients": 3} and rec.metrics["fleet.clients_up"] == 3.0
    assert bench.script.entered("") == ["fleet t1", "watched"] and bench.script.open() == []


def test_a_fleet_that_does_not_come_up_fails_its_trial(bench: Bench) -> None:
    bench.script_steps(fleet=[TunnelError("fake: server exited (code 1)")])
    rec = bench.cold(FleetWork.kind)
    assert (rec.status, rec.error) == ("failed", "fake: server exited (code 1)")
    assert "retried" not in rec.params and bench.script.open() == []


def test_a_void_fleet_measurement_is_tried_again(bench: Bench) -> None:
    bench.script_steps(measure=[RetryTrial("the clients' starts spread over 3 s")])
    rec = bench.cold(FleetWork.kind)
    assert rec.status == "ok" and rec.params["retried"] == ["the clients' starts spread over 3 s"]
    assert bench.script.entered("fleet") == ["fleet t1", "fleet t1r2"] and bench.script.open() == []


def test_bringups_take_a_bare_pair_on_each_client_machine(bench: Bench) -> None:
    bench.site.machines = ("h1", "h2")
    rec = bench.cold(BringupWork.kind)
    assert rec.status == "ok", rec.error
    assert [e for e in bench.script.journal if e.startswith("bare_pair")] == [
        "bare_pair t1b0 on h1",
        "bare_pair t1b1 on h2",
    ]
    assert rec.metrics["setup_s.0"] is not None and rec.metrics["setup_s.1"] is not None
    assert bench.script.open() == []


def test_a_bringup_trials_time_limit_counts_the_retries_its_profiles_faults_cost(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits: list[float] = []
    real = bringups.watchdog
    monkeypatch.setattr(bringups, "watchdog", lambda limit, what: limits.append(limit) or real(limit, what))
    stall = find_profile("wg-init-stall")  # every bring-up's first 3 initiations lost: 3 x 5.16 s
    plain = fake_tunnel("a")
    spec = plain.adapter.spec.model_copy(update={"messages": "wg"})
    wg = dataclasses.replace(plain, adapter=plain.adapter.model_copy(update={"spec": spec}))
    for tunnel in (plain, wg):
        rec = bench.runner.run_trial(PlannedTrial(1, Case.of(tunnel, stall, BringupWork.kind, 1, "up"), 1))
        assert rec.status == "ok", rec.error
    assert limits[1] - limits[0] == pytest.approx(3 * 5.16)  # a tunnel of other messages: nothing to retry


def test_a_bare_pair_that_fails_fails_the_trial_after_tearing_down_the_first(bench: Bench) -> None:
    bench.site.machines = ("h1", "h2")
    bench.script_steps(bare_pair=[None, CommandFailed(["ssh", "h2"], 255, "Connection refused")])
    rec = bench.cold(BringupWork.kind)
    assert rec.status == "failed" and "Connection refused" in rec.error
    assert bench.script.entered("bare") == ["bare t1b0", "bare t1b1"] and bench.script.open() == []
