"""`tunbench run` in two steps: preflight (prepare: a frozen RunPlan, nothing created) and execution."""

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

__all__ = [
    "Budget",
    "RunObserver",
    "RunOutcome",
    "describe",
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
    "site_needs",
    "skipped_lines",
    "warm_note",
]
