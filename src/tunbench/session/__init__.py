"""`tunbench run` in two steps: preflight (prepare: a frozen RunPlan, nothing created) and execution."""

from tunbench.session.defaults import INSTRUCTIONS_RATE, ab_cpuset, split_where_placeable, with_instructions_rate
from tunbench.session.describe import dry_run_lines
from tunbench.session.execution import RunObserver, RunOutcome, execute, provenance
from tunbench.session.preflight import (
    Budget,
    describe,
    expected_s,
    minutes,
    prepare,
    program_needs,
    repetition_warning,
    resolve_profiles,
    resolve_tunnels,
    rounds_within,
    site_needs,
    skipped_lines,
    warm_note,
)
from tunbench.session.resolve import run_inventory
from tunbench.session.stop import StopRule, TargetRefused

__all__ = [
    "INSTRUCTIONS_RATE",
    "Budget",
    "RunObserver",
    "RunOutcome",
    "StopRule",
    "TargetRefused",
    "ab_cpuset",
    "describe",
    "dry_run_lines",
    "execute",
    "expected_s",
    "minutes",
    "prepare",
    "program_needs",
    "provenance",
    "repetition_warning",
    "resolve_profiles",
    "resolve_tunnels",
    "rounds_within",
    "run_inventory",
    "site_needs",
    "skipped_lines",
    "split_where_placeable",
    "warm_note",
    "with_instructions_rate",
]
