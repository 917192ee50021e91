"""How long a plan takes and how many repetitions it holds: each trial's expected wall clock (the
workload's own estimate), and a wall-time budget (--budget, --until; calibrate's pairs) that sizes the
repetitions and counts the rounds that fit in it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel

from tunbench.config.load import with_overrides
from tunbench.config.schema import Scenario
from tunbench.errors import ConfigError
from tunbench.plan import Case, PlannedTrial, RunPlan, interleave
from tunbench.units import Window
from tunbench.workloads import get as get_workload
from tunbench.workloads.base import TRIAL_SETUP_S


def expected_s(pt: PlannedTrial, options: Mapping[str, BaseModel], window: Window, machines: int = 1) -> float:
    """The workload's own estimate of one trial's wall clock (idle phases, client set-up and searches
    included) plus what the profile's counted faults add to each of its bring-ups, for the time announced
    before a run and the progress bar's ETA. `machines`: the client machines a workload that brings its
    pairs up itself takes turns on (its estimate is for one), as trial/bringups.py scales its time limit."""
    workload = get_workload(pt.case.workload)
    opts = options.get(workload.kind) or workload.options(None)
    full = workload.estimate(pt.case, opts, window)
    if pt.reuses_bringup:
        return max(window.total_s, full - TRIAL_SETUP_S)
    full += workload.bringups(opts) * pt.case.fault_s  # the retries a profile's faults cost each bring-up
    if workload.owns_bringup:
        full *= max(1, machines)
    return full


@dataclass(frozen=True)
class Budget:
    """`--budget` / `--until`: the most wall time a run may take. The plan then holds as many repetitions
    as the measured seconds alone allow (no round can be faster): the upper bound of a run that stops at the
    deadline, at the pace it really keeps. `must_fit`: refused unless this many rounds fit at the plan's
    estimated pace (calibrate's pairs)."""

    seconds: float
    text: str  # how the plan and the stop name it: "2m", "until 14:30"
    must_fit: int = 0

    def rounds(self, cases: int, window_s: float) -> int:
        """The most rounds of `cases` trials of `window_s` measured seconds each that the budget could hold."""
        per_round = max(1.0, cases * window_s)
        return max(2, min(1000, math.floor(self.seconds / per_round)))

    def check_fits(self, per_round_s: float) -> None:
        fit = math.floor(self.seconds / per_round_s)
        if fit < self.must_fit:
            raise ConfigError(
                f"--budget {self.text}: a round of these trials takes about {per_round_s:.0f} s, so {fit} "
                f"fit; at least {self.must_fit} are needed (--budget {math.ceil(self.must_fit * per_round_s)}s)",
                source="command line",
                key="budget",
            )


def sized(
    scenario: Scenario, cases: list[Case], options: Mapping[str, BaseModel], budget: Budget, machines: int = 1
) -> Scenario:
    """The scenario with as many repetitions of `cases` as `budget` could hold, once a round of them is
    known to fit as often as it must (Budget.must_fit, at the workloads' estimates)."""
    wl = scenario.workload
    one = interleave(cases, 1, scenario.run.seed, blocks=scenario.run.order == "blocks")
    budget.check_fits(sum(expected_s(pt, options, wl.window, machines) for pt in one))
    return with_overrides(scenario, {"run": {"repeat": budget.rounds(len(cases), wl.window.total_s)}})


def rounds_within(plan: RunPlan, budget_s: float) -> int:
    """How many of the plan's rounds (repetitions of every case) end within `budget_s` at the plan's own
    estimate of each trial, as the run's deadline stops: at a round boundary, when the next would overrun."""
    per_round = plan.total_s / max(1, plan.scenario.run.repeat)
    return min(plan.scenario.run.repeat, math.floor(budget_s / per_round)) if per_round > 0 else 0
