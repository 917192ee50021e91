"""`tunbench run`, first step: `prepare(scenario)` resolves tunnels, profiles and workload options, sizes
the repetitions to a budget when one is given, expands the trials, places the run on its site and runs the
preflight checks (root, programs, what cannot apply where): it creates nothing, so `--dry-run` is `prepare`
alone, and the plan it returns is frozen. Each step is its own module: resolve, size, place, check.
"""

from __future__ import annotations

from tunbench.config.load import check_workloads
from tunbench.config.schema import Scenario
from tunbench.plan import RunPlan, expand, interleave, skipped
from tunbench.session.check import check_caps, check_cases, check_events, check_machine, check_warm_order
from tunbench.session.place import settled
from tunbench.session.resolve import resolve_profiles, resolve_tunnels
from tunbench.session.size import Budget, expected_s, sized
from tunbench.sites.base import SiteChoice
from tunbench.sites.registry import choose
from tunbench.tomlfile import locate


def prepare(
    scenario: Scenario,
    source: str,
    *,
    dry_run: bool = False,
    text: str = "",
    flamegraphs: bool = False,
    budget: Budget | None = None,
    build: tuple[str, str] = ("", ""),
    site: SiteChoice | None = None,
    cores_flag: bool = False,
) -> RunPlan:
    """Resolve tunnels, profiles and workload options, expand the trials and run the preflight checks
    (root, the programs every tunnel and workload needs, perf for flamegraphs). Creates nothing. A dry
    run needs no root and notes missing programs instead of failing on them. `text`: the scenario file's
    text, when the tunnels and profiles came from it (errors then name its lines). `budget`: the repetitions
    are as many as it could hold (Budget). `build`: the build's (commit, branch). `site`: where the roles run
    (session.run_site); by default this machine. `cores_flag`: the cores axis came from `--cores` (its errors
    name the flag, else the file's line)."""
    notes: list[str] = []
    site = site or choose("local")
    refs = resolve_tunnels(scenario, source, text)
    profiles = resolve_profiles(scenario, source, notes if dry_run else None, text)
    wl = scenario.workload
    options = check_workloads(scenario, "", source)
    cases = expand(refs, profiles, wl.flows, list(wl.directions), wl.kind, options=options, cores=wl.cores)
    skip = skipped(refs, wl.kind)
    check_cases(cases, refs, skip, source)
    check_warm_order(scenario, source)
    if budget is not None:
        scenario = sized(scenario, cases, options, budget, site.client_count())
    trials = interleave(
        cases,
        scenario.run.repeat,
        scenario.run.seed,
        blocks=scenario.run.order == "blocks",
        warm=scenario.run.warm,
    )
    expected = [expected_s(pt, options, wl.window, site.client_count()) for pt in trials]
    commit, branch = build
    counter = instr_choice(scenario, here=site.programs_here)
    plan = RunPlan(
        scenario,
        source,
        refs,
        profiles,
        options,
        cases,
        trials,
        expected,
        skip,
        notes,
        flamegraphs,
        commit,
        branch,
        site=site,
        instr_counter=counter[0] if counter is not None else "",
        instr_why=counter[1] if counter is not None else "",
    )
    if cores_flag:
        cores_at: tuple[str, int | None, str] = ("command line", None, "--cores")
    else:
        cores_at = (source, locate(text, ["workload", "cores"]) if text else None, "workload.cores")
    plan = settled(plan, cores_at)
    check_caps(plan)
    check_events(plan)
    check_machine(plan, dry_run=dry_run)
    return plan


def instr_choice(scenario: Scenario, *, here: bool = True) -> tuple[str, str] | None:
    """With count_instructions, the counter that counts them and why (`[run] instr_counter`): on this machine
    (`here`) perf where its perf counts `instructions:u` under `auto`, else callgrind, probed once; on hosts,
    a forced callgrind, else the setting itself, which the hosts settle when the run connects (their perf
    and PMU: remote/instructions.py run_counter); None without."""
    if not scenario.run.count_instructions:
        return None
    from tunbench.perf import hwinstr

    setting = scenario.run.instr_counter
    if not here and setting != "callgrind":
        return setting, "each host's perf and PMU decide when the run connects (`tunbench doctor --hosts` says which)"
    choice = hwinstr.choose(setting, hwinstr.probe() if setting != "callgrind" else None)
    return choice.counter, choice.why
