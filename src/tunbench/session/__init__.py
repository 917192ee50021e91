"""`tunbench run` in two steps: preflight (prepare: a frozen RunPlan, nothing created) and execution.

preflight.py  prepare(scenario) -> RunPlan, in the order of the modules below
resolve.py    tunnels and profiles, resolved from the scenario's references
size.py       each trial's expected time; a budget's repetitions and the rounds that fit in it
place.py      the run's site (--site, --hosts or [hosts], else this machine), settled against what the plan
              needs (sites/needs.py)
check.py      the preflight checks: what cannot apply, root, the programs this machine needs
defaults.py   what a run's purpose implies: an A/B's CPU placement, counted instructions' fixed rate
stop.py       how a run stops before its planned repetitions: a budget, or a target precision
describe.py   the plan as text (--dry-run)
network.py    the scenario's network settings as one TopologySpec (a run's trials and `link shell` alike)
calibration.py  calibrate's A/A as a plan: its scenario, CPU placement, the cost of a pair, its dry run
execution.py  execute(plan, observer): the site opened, provenance, the run
"""

from tunbench.session.check import program_needs
from tunbench.session.defaults import INSTRUCTIONS_RATE, ab_cpuset, split_where_placeable, with_instructions_rate
from tunbench.session.describe import describe, dry_run_lines, repetition_warning, skipped_lines, warm_note
from tunbench.session.execution import RunObserver, RunOutcome, execute, provenance
from tunbench.session.place import run_inventory, run_site, site_needs
from tunbench.session.preflight import prepare
from tunbench.session.resolve import resolve_profiles, resolve_tunnels
from tunbench.session.size import Budget, expected_s, rounds_within
from tunbench.session.stop import StopRule, TargetRefused
from tunbench.units import minutes

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
    "run_site",
    "site_needs",
    "skipped_lines",
    "split_where_placeable",
    "warm_note",
    "with_instructions_rate",
]
