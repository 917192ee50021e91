"""How a run stops before its planned repetitions: at a wall-time budget (--budget, --until), or at the
precision of its A/B comparison (--target-mde) with the budget as the fallback. One `StopRule` sizes the plan
to the budget, checks that the target has its two labels, says how the run will stop (the plan, the dry run),
builds the runner's stop check and says how the run ended."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tunbench.plan import RunPlan
from tunbench.report.compare import Gate
from tunbench.report.precision import MIN_STOP_PAIRS, PrecisionStop, status_text, stop_text
from tunbench.results import TrialRecord
from tunbench.runner import Deadline, StopCheck
from tunbench.session.size import Budget, rounds_within


class TargetRefused(ValueError):
    """--target-mde cannot apply to this plan; the command names its flag."""


@dataclass(frozen=True)
class StopRule:
    """A run that stops at `budget_s` seconds after `started` (time.monotonic()), or before at `goal` (the
    target MDE, a fraction) as `gate` judges the comparison. `budget`: how the command named the budget
    ("2m", "until 14:30")."""

    budget_s: float
    budget: str
    started: float
    goal: float | None = None
    gate: Gate = field(default_factory=Gate)

    def sizing(self, *, fixed: bool) -> Budget | None:
        """The budget the plan is sized to: with no fixed repetitions (`fixed`: --repeat, --full), the plan
        holds as many rounds as could fit, the upper bound of a run that stops at the budget."""
        return None if fixed else Budget(self.budget_s, self.budget)

    def labels(self, plan: RunPlan) -> tuple[str, str]:
        """The two tunnel labels a target compares as pairs (direct never gates); TargetRefused unless the
        plan has exactly two. Without a target, nothing to check: ("", "")."""
        if self.goal is None:
            return "", ""
        labels = [r.label for r in plan.refs if r.name != "direct"]
        if len(labels) != 2:
            raise TargetRefused(
                f"needs exactly two tunnels (labels) to compare as pairs, e.g. -t 'wireguard-go[label=a]' "
                f"-t 'wireguard-go[label=b]'; this run has {len(labels)}: {', '.join(labels) or 'none'}"
            )
        return labels[0], labels[1]

    def text(self, plan: RunPlan) -> str:
        """The stop rule in a line: what ends the run, and the plan's repetitions as the upper bound."""
        reps = plan.scenario.run.repeat
        if self.goal is None:
            return f"budget {self.budget}: repetitions until it is spent, at most {reps}"
        wide = f"{self.gate.threshold('wide', self.goal):.1%}"
        if self.gate.name == "all":
            tiers = "every gated comparison (--gate all)"
        elif plan.scenario.run.count_instructions:  # the work gate, where both labels count
            tiers = f"the tunnel's instructions/byte (the work gate; each side's at most ±{wide})"
        else:
            tiers = (
                f"the tunnel's CPU/bit delivered (--gate cost; throughput's, the wire overhead's and each side's "
                f"at most ±{wide})"
            )
        return (
            f"target ±{self.goal:.1%}".replace(".0%", "%") + f" within {self.budget}: pairs until the largest "
            f"paired MDE of {tiers} is at most the target (never on significance), at most {reps}"
        )

    def dry_run_lines(self, plan: RunPlan) -> list[str]:
        """What the dry run says of the stop: its rule and, where the target needs more pairs than fit in the
        budget at the plan's estimate, a warning: the run would then always stop at the budget, never on its
        target."""
        lines = [f"stop: {self.text(plan)}"]
        if self.goal is None:
            return lines
        fit = rounds_within(plan, self.budget_s)
        if fit < MIN_STOP_PAIRS:
            per_round = plan.total_s / max(1, plan.scenario.run.repeat)
            need = math.ceil(MIN_STOP_PAIRS * per_round / 60.0)
            lines.append(
                f"warning: the stop needs at least {MIN_STOP_PAIRS} pairs per case, and about {fit} fit in the "
                f"budget ({self.budget}) at the estimate of each trial: this run cannot stop on its target and will "
                f"end at the budget; give --budget {need}m or more, or shorter trials (--duration, --omit)"
            )
        return lines

    @property
    def ends(self) -> float:
        """When the budget ends (time.monotonic())."""
        return self.started + self.budget_s

    def check(self, plan: RunPlan, note: Callable[[str], None] | None = None) -> Deadline | PrecisionStop:
        """The runner's stop check: the deadline, or the precision stop with the deadline as its fallback,
        which tells `note` where the precision stands after each block."""
        deadline = Deadline(self.ends, min_blocks=2)
        if self.goal is None:
            return deadline
        a, b = self.labels(plan)
        stop = PrecisionStop(a, b, self.goal, budget=deadline, gate=self.gate)
        if note is not None:
            stop.listener = lambda p: note(f"{status_text(p)} · {self.left_s():.0f} s of the budget left")
        return stop

    def left_s(self) -> float:
        """Seconds of the budget left now."""
        return max(0.0, self.budget_s - (time.monotonic() - self.started))

    def ended(self, check: StopCheck | None, status: str, stopped: str, trials: Sequence[TrialRecord]) -> str:
        """How the run ended, said after its tables: a target's precision once the run is done (reached, or
        where it stood at the budget or after the planned repetitions), else why it stopped at the budget;
        "" when the stop did not end it. `status`, `stopped`: the run's outcome."""
        if isinstance(check, PrecisionStop) and status == "done":
            final = check.measure(list(trials))
            return stop_text(final, "target" if final.reached else check.by or "plan")
        return f"stopped at the budget ({self.budget}): {stopped}" if stopped else ""
