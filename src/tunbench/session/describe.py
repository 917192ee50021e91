"""The plan as text: what `tunbench run --dry-run` prints after its header."""

from __future__ import annotations

from tunbench.plan import RunPlan
from tunbench.session.preflight import describe, skipped_lines
from tunbench.session.stop import StopRule


def dry_run_lines(plan: RunPlan, stop: StopRule | None = None) -> list[str]:
    """The plan (`describe`; with a `stop`, its estimate capped by the budget), how the run would stop, what
    it skips, and what would make a real run fail (the plan's notes)."""
    lines = describe(plan, (stop.budget_s, stop.budget) if stop is not None else None)
    if stop is not None:
        lines += stop.dry_run_lines(plan)
    lines += skipped_lines(plan)
    lines += [f"note: a real run would fail: {note}" for note in plan.notes]
    return lines
