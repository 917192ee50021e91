"""session.StopRule, the stop of `run --budget` / `--target-mde`: the plan sized to the budget unless the
repetitions are fixed, the target's two labels, the runner's check, and what the run says at its end (also
through `tunbench run` with execute faked: nothing is measured)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.unit.report_data import trial
from tunbench import session
from tunbench.cli import app
from tunbench.config.load import load_scenario, with_overrides
from tunbench.plan import RunPlan
from tunbench.report.precision import PrecisionStop
from tunbench.runner import Deadline
from tunbench.session import RunOutcome, StopRule, TargetRefused
from tunbench.store.db import Store


def plan(*tunnels: str) -> RunPlan:
    sc, _, source = load_scenario(None)
    sc = with_overrides(sc, {"run": {"tunnels": list(tunnels), "direct": False}})
    return session.prepare(sc, source, dry_run=True)


def test_the_plan_is_sized_to_the_budget_unless_the_repetitions_are_fixed() -> None:
    rule = StopRule(120.0, "2m", time.monotonic())
    sized = rule.sizing(fixed=False)
    assert sized is not None and (sized.seconds, sized.text) == (120.0, "2m")
    assert rule.sizing(fixed=True) is None


def test_a_target_needs_exactly_two_labels_and_a_budget_alone_needs_none() -> None:
    two = plan("wireguard-go[label=a]", "wireguard-go[label=b]")
    assert StopRule(60.0, "1m", 0.0, goal=0.03).labels(two) == ("a", "b")
    with pytest.raises(TargetRefused, match="this run has 1: socat"):
        StopRule(60.0, "1m", 0.0, goal=0.03).labels(plan("socat"))
    assert StopRule(60.0, "1m", 0.0).labels(plan("socat")) == ("", "")


def test_the_check_is_a_deadline_or_a_precision_stop_that_reports_its_progress() -> None:
    two = plan("wireguard-go[label=a]", "wireguard-go[label=b]")
    assert isinstance(StopRule(60.0, "1m", time.monotonic()).check(two), Deadline)
    notes: list[str] = []
    stop = StopRule(60.0, "1m", time.monotonic(), goal=0.03).check(two, notes.append)
    assert isinstance(stop, PrecisionStop) and (stop.label_a, stop.label_b) == ("a", "b")
    assert isinstance(stop.budget, Deadline)
    stop([], [])
    assert len(notes) == 1 and notes[0].endswith("s of the budget left"), notes


def test_the_end_says_why_the_run_stopped() -> None:
    rule = StopRule(60.0, "1m", 0.0)
    assert rule.ended(None, "done", "deadline: 3 s left", []) == "stopped at the budget (1m): deadline: 3 s left"
    assert rule.ended(None, "done", "", []) == ""
    target = StopRule(60.0, "1m", 0.0, goal=0.03)
    check = PrecisionStop("a", "b", 0.03)
    assert target.ended(check, "done", "", []).startswith("stopped after the planned repetitions (--repeat)")
    assert target.ended(check, "interrupted", "", []) == ""


def test_run_says_where_the_budget_stopped_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "r.db"
    records = [trial(1, "socat", 1e9)]
    with Store(db) as s:
        rid = s.create_run(
            uid="tbabcdef", name="", tunbench_version="0", provenance={}, scenario_text="", scenario_hash="",
            scenario={},
        )  # fmt: skip
        s.add_trial(rid, records[0])
        s.finish_run(rid, "done")
    seen = {}

    def fake_execute(*a: object, **k: object) -> RunOutcome:
        seen["stop"] = k["stop"]
        return RunOutcome(run_id=rid, uid="tbabcdef", status="done", records=records, stopped="deadline: 2 s left")

    monkeypatch.setattr(session, "execute", fake_execute)
    monkeypatch.setattr("os.geteuid", lambda: 0)
    monkeypatch.setattr("tunbench.session.check.check_dependencies", lambda *a, **k: None)
    res = CliRunner().invoke(app, ["run", "-t", "socat", "--budget", "2m", "--db", str(db)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert isinstance(seen["stop"], Deadline)
    assert "budget 2m: repetitions until it is spent, at most" in res.output
    assert "stopped at the budget (2m): deadline: 2 s left" in res.output
