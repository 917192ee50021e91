"""The runner tries a void measurement (RetryTrial) again from scratch, a bounded number of times, and
keeps why; any other failure is final at once."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from tunbench import workloads
from tunbench.errors import RetryTrial, TrialError
from tunbench.host import ledger as state
from tunbench.link.profile import Profile
from tunbench.plan import Case, PlannedTrial
from tunbench.results import TrialRecord
from tunbench.runner import MAX_ATTEMPTS, Runner
from tunbench.sites.local import LocalSite
from tunbench.store.db import Store
from tunbench.trial.attempt import Setup
from tunbench.tunnels.registry import parse_ref
from tunbench.units import Window
from tunbench.workloads.base import BringupContext, Measurement, Workload


class Scripted(Workload[BringupContext]):
    """Owns its bring-up and never brings anything up (so no namespaces are needed); fails as scripted,
    then succeeds."""

    kind = "scripted"
    description = "test double for the runner"
    owns_bringup = True
    script: ClassVar[list[Exception | None]] = []
    calls: ClassVar[int] = 0

    def measure(self, ctx: BringupContext) -> Measurement:
        step = Scripted.script[min(Scripted.calls, len(Scripted.script) - 1)]
        Scripted.calls += 1
        if step is not None:
            raise step
        return Measurement(metrics={"attempt": float(Scripted.calls)})


RunOne = Callable[[list[Exception | None]], TrialRecord]


@pytest.fixture
def run_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunOne]:
    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(workloads, "get", lambda kind: Scripted())
    Scripted.calls = 0
    ledger = state.Ledger.open("tbabc123")
    store = Store(tmp_path / "r.db")
    r = Runner(Setup(ledger, LocalSite(ledger), Window(1, 0)), store, run_id=1)
    case = Case.of(parse_ref("direct"), Profile(name="lan", emulated=False), "scripted", 1, "up")

    def go(script: list[Exception | None]) -> TrialRecord:
        Scripted.script = script
        return r.run_trial(PlannedTrial(1, case, 0))

    yield go
    store.close()


def test_a_void_measurement_is_tried_again_and_the_reason_kept(run_one: RunOne) -> None:
    rec = run_one([RetryTrial("roles crossed"), None])
    assert rec.status == "ok" and rec.error == ""
    assert rec.metrics["attempt"] == 2.0  # the record is the successful attempt's, not a mix
    assert rec.params["retried"] == ["roles crossed"]


def test_retries_are_bounded_and_the_last_reason_is_the_error(run_one: RunOne) -> None:
    rec = run_one([RetryTrial("roles crossed")])
    assert Scripted.calls == MAX_ATTEMPTS
    assert rec.status == "failed" and rec.error == "roles crossed"
    assert rec.params["retried"] == ["roles crossed"] * (MAX_ATTEMPTS - 1)


def test_other_failures_are_not_retried(run_one: RunOne) -> None:
    rec = run_one([TrialError("tunnel broke"), None])
    assert Scripted.calls == 1 and rec.status == "failed" and "retried" not in rec.params


class Hangs(Scripted):
    """A workload that never returns on its own: the watchdog must stop it."""

    kind = "hangs"

    def trial_timeout_s(self, *args: object) -> float:  # type: ignore[override]
        return 0.5

    def measure(self, ctx: BringupContext) -> Measurement:
        from tunbench.host.proc import run_cmd

        run_cmd(["sleep", "600"], timeout_s=5, what="a hung tool")  # without a watchdog: fails late
        return Measurement()


def test_a_hung_workload_fails_its_own_trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    import psutil

    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(workloads, "get", lambda kind: Hangs())
    ledger = state.Ledger.open("tbabc124")
    with Store(tmp_path / "r.db") as store:
        r = Runner(Setup(ledger, LocalSite(ledger), Window(1, 0)), store, run_id=1)
        case = Case.of(parse_ref("direct"), Profile(name="lan", emulated=False), "hangs", 1, "up")
        t0 = time.monotonic()
        rec = r.run_trial(PlannedTrial(1, case, 0))
    assert time.monotonic() - t0 < 4
    assert rec.status == "failed" and "watchdog" in rec.error, rec.error
    assert "still running after its 0.5 s limit" in rec.error
    # the hung tool's process group was ended with the trial
    assert not [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "600"]]


def test_a_window_that_lost_cpu_to_steal_is_void_only_when_asked() -> None:
    from tunbench.monitor.interference import RedoPolicy

    assert RedoPolicy().void({"host.steal_pct": 12.0}, {}) == ""  # default: kept (compare flags it)
    assert RedoPolicy(steal_pct=5.0).void({"host.steal_pct": 4.9}, {}) == ""
    assert RedoPolicy(steal_pct=5.0).void({}, {}) == ""  # no steal figure (not a VM, or not read)
    why = RedoPolicy(steal_pct=5.0).void({"host.steal_pct": 5.0}, {})
    assert "5.0% of the CPUs' time" in why and "redo_steal_pct 5%" in why


def test_an_interfered_window_is_void_only_with_redo_interfered() -> None:
    from tunbench.monitor.interference import RedoPolicy

    m: dict[str, float | None] = {"interfered": 1.0}
    p = {"interference": "another tunbench run live (tb123456)"}
    assert RedoPolicy().void(m, p) == ""
    why = RedoPolicy.of(None, True, 10.0).void(m, p)
    assert "interfered: another tunbench run live (tb123456)" in why
    assert RedoPolicy.of(None, True, 10.0).void({"interfered": 0.0}, p) == ""


def test_a_void_window_is_measured_again_only_within_the_budget() -> None:
    from tunbench.monitor.interference import RedoPolicy

    assert RedoPolicy.of(None, True, 10.0).fits(30.0, 1e9)  # no budget: always
    ends = RedoPolicy.of(None, True, 10.0, until=100.0)
    assert ends.fits(5.0, 95.0) and not ends.fits(5.0, 95.5)  # another attempt as long as this one must fit
