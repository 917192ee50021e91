"""`tunbench run`, first step: `prepare(scenario)` resolves tunnels, profiles and workload options, sizes
the repetitions to a budget when one is given, expands the trials and runs the preflight checks (root,
programs, what cannot apply where): it creates nothing, so `--dry-run` is `prepare` alone, and the plan it
returns is frozen.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from tunbench.config.load import check_workloads, with_overrides
from tunbench.config.schema import Scenario
from tunbench.errors import ConfigError, DependencyMissing, TunbenchError
from tunbench.host import HOST_TOOLS
from tunbench.link.profile import Profile, builtin_dir, find_profile, validate_with_link
from tunbench.plan import PlannedTrial, RunPlan, expand, interleave, skipped
from tunbench.remote.inventory import Inventory
from tunbench.sites.base import SiteChoice
from tunbench.sites.needs import SiteNeeds
from tunbench.sites.registry import of_inventory
from tunbench.tomlfile import dotted, locate
from tunbench.tunnels.programs import absolute_programs, built
from tunbench.tunnels.registry import TunnelRef, missing_requirements, parse_ref, required_programs
from tunbench.units import Window
from tunbench.workloads import REGISTRY
from tunbench.workloads import get as get_workload
from tunbench.workloads.base import TRIAL_SETUP_S

T = TypeVar("T")


def _ref_error(e: ConfigError, source: str, text: str, key: str, index: int) -> ConfigError:
    """An error about a reference in the scenario (not inside the adapter or profile file it names) gets the
    scenario's line and the list key."""
    if e.source != source:
        return e
    return ConfigError(
        e.detail, source=source, line=locate(text, key.split(".")) if text else None, key=f"{key}[{index}]"
    )


def _resolve_each(items: list[str], resolve: Callable[..., T], source: str, text: str, key: str) -> list[T]:
    """Each reference of a scenario list (run.tunnels, run.profiles) resolved; an error about an entry
    names the scenario's line and the entry (`run.tunnels[1]`)."""
    out = []
    for i, item in enumerate(items):
        try:
            out.append(resolve(item, source=source))
        except ConfigError as e:
            raise _ref_error(e, source, text, key, i) from None
    return out


def resolve_tunnels(scenario: Scenario, source: str, text: str = "") -> list[TunnelRef]:
    """`text`: the scenario file's text, when run.tunnels came from it (for the line of an error). A relative
    program path still in a reference came from `--tunnel` (a scenario file's were made absolute when it was
    loaded): it is made absolute against the directory tunbench was started in."""
    refs = _resolve_each(scenario.run.tunnels, parse_ref, source, text, "run.tunnels")
    refs = [absolute_programs(r, Path.cwd()) for r in refs]
    if scenario.run.direct and not any(r.name == "direct" for r in refs):
        refs.insert(0, parse_ref("direct"))
    labels = [r.label for r in refs]
    dup = {lb for lb in labels if labels.count(lb) > 1}
    if dup:
        raise ConfigError(
            f"tunnel label(s) used twice: {', '.join(sorted(dup))}; add label=... to tell them apart",
            source=source,
            line=locate(text, ["run", "tunnels"]) if text else None,
            key="run.tunnels",
        )
    topo = scenario.topology  # every tunnel runs with the run's IP families (plan.ip_refusal checks them)
    return [dataclasses.replace(r, underlay=topo.underlay, overlay=topo.overlay) for r in refs]


def resolve_profiles(scenario: Scenario, source: str, notes: list[str] | None = None, text: str = "") -> list[Profile]:
    """`notes`: a dry run's list; a missing tunbench-link is noted there (its values go unchecked)
    instead of raised. `text`: the scenario file's text, when run.profiles came from it."""
    profiles = _resolve_each(scenario.run.profiles, find_profile, source, text, "run.profiles")
    for i, (ref, prof) in enumerate(zip(scenario.run.profiles, profiles, strict=True)):
        if not prof.emulated:
            continue
        try:
            validate_with_link(prof)
        except DependencyMissing as e:
            if notes is None:
                raise
            notes.append(f"profile {prof.name} not checked by tunbench-link: {e}")
        except ConfigError as e:  # name the profile's file and line, or the scenario's entry of an inline one
            raise _link_error(e, ref, i, source, text) from None
    names = [p.name for p in profiles]
    if len(set(names)) != len(names):
        raise ConfigError(
            "a profile is listed twice",
            source=source,
            line=locate(text, ["run", "profiles"]) if text else None,
            key="run.profiles",
        )
    return profiles


def _link_error(e: ConfigError, ref: str, index: int, source: str, text: str) -> ConfigError:
    """tunbench-link refused a profile's value (`e.key` = up.delay...): point at where that value is."""
    if e.line is not None:  # already placed (a timeline's row)
        return e
    if ":" not in ref:  # a file (given, or a built-in)
        path = Path(ref) if "/" in ref or ref.endswith(".toml") else builtin_dir() / f"{ref}.toml"
        try:
            line = locate(path.read_text(encoding="utf-8"), dotted(e.key)) if e.key else None
        except (OSError, UnicodeDecodeError):
            line = None
        return ConfigError(e.detail, source=str(path), line=line, key=e.key)
    key = f"run.profiles[{index}]" + (f": {e.key}" if e.key else "")
    return ConfigError(e.detail, source=source, line=locate(text, ["run", "profiles"]) if text else None, key=key)


def need_root() -> None:
    """Namespaces, veth pairs and cgroups need root: say so before anything is created."""
    if os.geteuid() != 0:
        raise TunbenchError(
            "tunbench run needs root (network namespaces, cgroups): run it with sudo "
            "(`tunbench run --dry-run` checks a scenario without root)"
        )


def check_named_files(refs: list[TunnelRef]) -> None:
    """The programs a tunnel names by path (a build: `bin=./wireguard-go`, or an adapter's absolute path) must
    exist, in a dry run too: a CI job's pre-check has to fail on a build that is not there, and `make deps`
    cannot install it. DependencyMissing names each tunnel and file."""
    problems = []
    for r in refs:
        for prog in required_programs(r):
            if "/" in prog and shutil.which(prog) is None:
                what = "no such file" if not Path(prog).exists() else "not an executable file"
                problems.append(f"{r.label}: {prog}: {what}")
    if problems:
        raise DependencyMissing(
            "a program named by path is missing: " + "; ".join(problems) + " (build it first, or correct bin=)"
        )


INSTRUCTION_TOOLS = ("valgrind", "callgrind_control")


def check_dependencies(
    refs: list[TunnelRef], profiles: list[Profile], kinds: tuple[str, ...] = (), count_instructions: bool = False
) -> None:
    problems = []
    for r in refs:
        miss = missing_requirements(r)
        if miss:
            problems.append(f"{r.label} needs {', '.join(miss)}")
    for tool in HOST_TOOLS:
        if shutil.which(tool) is None:
            problems.append(f"tunbench needs {tool}")
    for kind in kinds:
        for tool in get_workload(kind).requires:
            if shutil.which(tool) is None:
                problems.append(f"the workload {kind} needs {tool}")
    if any(p.emulated for p in profiles):
        from tunbench.link.binary import link_binary_or_none

        if link_binary_or_none() is None:
            problems.append("emulated profiles need tunbench-link (`make build`, or set TUNBENCH_LINK)")
    if count_instructions:
        problems += [f"--count-instructions needs {tool}" for tool in INSTRUCTION_TOOLS if shutil.which(tool) is None]
    if problems:
        raise DependencyMissing(
            "missing programs: " + "; ".join(problems) + " (run `make deps` or `tunbench doctor` for what to install)"
        )


def expected_s(pt: PlannedTrial, options: Mapping[str, BaseModel], window: Window) -> float:
    """The workload's own estimate of one trial's wall clock (idle phases, client set-up and searches
    included), for the time announced before a run and the progress bar's ETA."""
    workload = get_workload(pt.case.workload)
    opts = options.get(workload.kind) or workload.options(None)
    full = workload.estimate(pt.case, opts, window)
    if pt.reuses_bringup:
        return max(window.total_s, full - TRIAL_SETUP_S)
    return full


def warm_note(plan: RunPlan) -> str:
    """How the run's warm blocks measure ("" when every trial is cold)."""
    warm = [pt for pt in plan.trials if pt.warm]
    if not warm:
        return ""
    bringups = len({(pt.block, pt.case.tunnel.label) for pt in warm})
    return (
        f"warm: {len(warm)} trial(s) are windows on running tunnels, {plan.warm} per bring-up "
        f"({bringups} bring-ups instead of {len(warm)})"
    )


def repetition_warning(plan: RunPlan) -> str:
    """The one minimum-repetition rule (stats.min_repetitions via report.compare.repetition_note) applied to
    this plan: a warning when its repetitions cannot give compare any verdict for the gated family ("" else)."""
    from tunbench.report.compare import repetition_note

    labels = {pt.case.tunnel.label for pt in plan.trials if pt.case.tunnel.name != "direct"}
    if not labels:
        return ""
    units: dict[tuple[str, str], set[object]] = {}
    for pt in plan.trials:
        if pt.case.tunnel.name != "direct":
            units.setdefault((pt.case.tunnel.label, pt.case.title), set()).add(("b", pt.block) if pt.warm else pt.seq)
    cases = max(sum(1 for label, _ in units if label == one) for one in labels)
    return repetition_note(
        labels=len(labels),
        cases_per_label=cases,
        units=min(len(u) for u in units.values()),
        warm=max(1, plan.warm),
    )


def minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


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


def prepare(
    scenario: Scenario,
    source: str,
    *,
    dry_run: bool = False,
    text: str = "",
    flamegraphs: bool = False,
    inventory: Inventory | None = None,
    budget: Budget | None = None,
    build: tuple[str, str] = ("", ""),
    site: SiteChoice | None = None,
) -> RunPlan:
    """Resolve tunnels, profiles and workload options, expand the trials and run the preflight checks
    (root, the programs every tunnel and workload needs, perf for flamegraphs). Creates nothing. A dry
    run needs no root and notes missing programs instead of failing on them. `text`: the scenario file's
    text, when the tunnels and profiles came from it (errors then name its lines). `budget`: the
    repetitions are as many as it could hold (Budget). `build`: the build's (commit, branch). `site`: where
    the roles run (sites.registry.choose); by default the hosts of `inventory`, or this machine."""
    notes: list[str] = []
    refs = resolve_tunnels(scenario, source, text)
    profiles = resolve_profiles(scenario, source, notes if dry_run else None, text)
    wl = scenario.workload
    options = check_workloads(scenario, "", source)
    cases = expand(refs, profiles, wl.flows, list(wl.directions), wl.kind, options=options)
    skip = skipped(refs, wl.kind)
    named = [r for r in refs if r.name != "direct"]
    if not cases or (named and all(c.tunnel.name == "direct" for c in cases)):
        why = "; ".join(f"{label} × {kind}: {reason}" for label, kind, reason in skip)
        raise ConfigError(
            f"nothing to run: no tunnel can carry these workloads ({why or 'no case'})",
            source=source,
            key="run.tunnels",
        )
    if scenario.run.warm > 1 and scenario.run.order != "blocks":
        raise ConfigError(
            "warm windows alternate the tunnels of a block: warm > 1 needs order = 'blocks'",
            source=source,
            key="run.warm",
        )
    if budget is not None:
        one = interleave(cases, 1, scenario.run.seed, blocks=scenario.run.order == "blocks")
        budget.check_fits(sum(expected_s(pt, options, wl.window) for pt in one))
        repeat = budget.rounds(len(cases), wl.window.total_s)
        scenario = with_overrides(scenario, {"run": {"repeat": repeat}})
    trials = interleave(
        cases,
        scenario.run.repeat,
        scenario.run.seed,
        blocks=scenario.run.order == "blocks",
        warm=scenario.run.warm,
    )
    expected = [expected_s(pt, options, wl.window) for pt in trials]
    commit, branch = build
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
        site=site or of_inventory(inventory),
    )
    plan = dataclasses.replace(plan, site=plan.site.settle(site_needs(plan)))
    check_caps(plan)
    check_events(plan)
    if plan.site.programs_here:  # elsewhere, the paths are those machines' own, checked there once connected
        check_named_files(refs)
    if dry_run:
        try:
            check_dependencies(refs, profiles, tuple(wl.kind), scenario.run.count_instructions)
        except DependencyMissing as e:
            notes.append(str(e))
        return plan
    need_root()
    if plan.site.programs_here:  # elsewhere, each machine's programs are checked once connected
        check_dependencies(refs, profiles, tuple(wl.kind), scenario.run.count_instructions)
    if flamegraphs:
        from tunbench.perf.flamegraph import check_tools

        check_tools()
    return plan


def not_pair(plan: RunPlan) -> str:
    """The first workload of the run that is not measured on the client/server pair (Workload.pair), or ""."""
    return next((kind for kind in plan.scenario.workload.kind if not get_workload(kind).pair()), "")


def check_caps(plan: RunPlan) -> None:
    """client_cpu= / server_cpu= cap the pair's tunnel processes: refused with the workloads that bring up
    many clients or their own tunnels, where it would silently not apply."""
    capped = [r.label for r in plan.refs if r.cpu_caps]
    if not capped:
        return
    if kind := not_pair(plan):
        raise ConfigError(
            f"client_cpu= / server_cpu= ({', '.join(capped)}) cap the client/server pair's tunnel; workload "
            f"{kind!r} brings up many clients or its own tunnels, where no cap applies",
            source=plan.source,
            key="run.tunnels",
        )


def check_events(plan: RunPlan) -> None:
    """A profile a workload has nothing to measure over (`profile_problem`) is refused; and a profile's events
    start with the measured traffic of the client/server pair, once per bring-up: refused where they would
    not (many clients, own bring-ups, warm windows; a site that cannot start them has refused them when it
    was settled) instead of being silently ignored."""
    for kind in plan.scenario.workload.kind:  # a workload with nothing to measure over a profile
        for prof in plan.profiles:
            if why := get_workload(kind).profile_problem(prof):
                raise ConfigError(why, source=plan.source, key="run.profiles")
    scheduled = [p.name for p in plan.profiles if p.timed()]
    if not scheduled:
        return
    why = ""
    if kind := not_pair(plan):
        why = f"workload {kind!r} brings up many clients or its own tunnels"
    elif plan.warm > 1:
        why = f"warm = {plan.warm} measures several windows per bring-up, and the events run once"
    if why:
        raise ConfigError(
            f"profile(s) {', '.join(scheduled)} change over time (events, a trace), which start with the "
            f"client/server pair's traffic: {why}; use a profile without events or traces there",
            source=plan.source,
            key="run.profiles",
        )


def skipped_lines(plan: RunPlan) -> list[str]:
    """One line per reason: the tunnel × workload pairs that will not run, and why."""
    by_reason: dict[str, list[str]] = {}
    for label, kind, reason in plan.skipped:
        by_reason.setdefault(reason, []).append(f"{label} × {kind}")
    return [f"note: skipped {', '.join(pairs)}: {reason}" for reason, pairs in by_reason.items()]


def plural(n: int, word: str, many: str = "") -> str:
    """'1 case', '2 cases'."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def rounds_within(plan: RunPlan, budget_s: float) -> int:
    """How many of the plan's rounds (repetitions of every case) end within `budget_s` at the plan's own
    estimate of each trial, as the run's deadline stops: at a round boundary, when the next would overrun."""
    per_round = plan.total_s / max(1, plan.scenario.run.repeat)
    return min(plan.scenario.run.repeat, math.floor(budget_s / per_round)) if per_round > 0 else 0


def describe(plan: RunPlan, budget: tuple[float, str] | None = None) -> list[str]:
    """The plan as text, for `tunbench run --dry-run`. `budget`: (seconds, how the flag named it), when the
    run stops at a budget: the estimate is then capped by it and says how many rounds fit."""
    scenario = plan.scenario
    per_case: dict[str, tuple[float, int]] = {}
    for pt, e in zip(plan.trials, plan.expected, strict=True):
        per_case[pt.case.title] = e, pt.case.clients if get_workload(pt.case.workload).fleet else 0
    cases = []
    for title, (e, n) in per_case.items():
        cases.append(f"  {title}  (~{minutes(e)} per trial)")
        if n and (where := plan.site.fleet_line(n)):
            cases.append(f"    {where}")
    lines = [
        "tunnels: "
        + ", ".join(f"{r.label} ({', '.join([r.adapter.spec.layer.upper(), *built(r)])})" for r in plan.refs),
        "profiles: " + ", ".join(f"{p.name} ({'emulated' if p.emulated else 'veth'})" for p in plan.profiles),
        "workloads: " + ", ".join(scenario.workload.kind),
        *plan.site.lines(),
        f"cases ({len(plan.cases)}):",
        *cases,
        _size_line(plan, budget),
    ]
    if scenario.run.count_instructions:
        rate = str(dict(getattr(scenario.workload, "iperf3", None) or {}).get("rate") or "")
        lines.append(
            "instructions: each role's tunnel daemon counted by callgrind (valgrind) over each trial, per payload "
            "byte delivered" + (f"; iperf3 offers a fixed {rate}" if rate else "")
        )
    if warm := warm_note(plan):
        lines.append(warm)
    if few := repetition_warning(plan):
        lines.append(few)
    builds = [f"commit {plan.commit}"] if plan.commit else []
    builds += [f"branch {plan.branch}"] if plan.branch else []
    builds += [f"{r.label} at commit {r.commit}" for r in plan.refs if r.commit]
    if builds:
        lines.append("build: " + ", ".join(builds))
    return lines


def _size_line(plan: RunPlan, budget: tuple[float, str] | None) -> str:
    """'4 cases × 3 repetitions = 12 trials, about 66 s (seed 1)'; with a budget, the planned repetitions are
    an upper bound and the estimate is what fits: 'about 2.0 min: 12 of the 20 planned rounds fit in --budget
    2m at the estimate (4.0 min if all ran)'."""
    scenario = plan.scenario
    reps, seed = scenario.run.repeat, scenario.run.seed
    size = f"{plural(len(plan.cases), 'case')} × {plural(reps, 'repetition')} = {plural(len(plan.trials), 'trial')}"
    if budget is None:
        return f"{size}, about {minutes(plan.total_s)} (seed {seed})"
    seconds, text = budget
    fit = rounds_within(plan, seconds)
    if fit >= reps:
        return f"{size}, about {minutes(plan.total_s)}, within the budget ({text}) (seed {seed})"
    est = plan.total_s * fit / max(1, reps)
    return (
        f"{size} at most, about {minutes(est)}: {fit} of the {reps} planned rounds fit in the budget ({text}) at "
        f"the estimate of each trial ({minutes(plan.total_s)} if all ran) (seed {seed})"
    )


def program_needs(refs: list[TunnelRef], kinds: Iterable[str]) -> dict[str, list[str]]:
    """Who needs which programs on a machine that runs its roles: tunbench itself, each tunnel (`requires`)
    and each workload; what `--hosts` checks on every host and `doctor --hosts` lists per host."""
    needs = {"tunbench": list(HOST_TOOLS)}
    needs |= {f"tunnel {r.label}": required_programs(r) for r in refs}
    needs |= {f"workload {kind}": list(get_workload(kind).requires) for kind in kinds}
    return needs


def site_needs(plan: RunPlan) -> SiteNeeds:
    """What the plan asks of its site, as the values a site reads (sites.needs): the site refuses from them
    what it cannot do, and sets itself up with them."""
    kinds = tuple(plan.scenario.workload.kind)
    workloads = {kind: get_workload(kind) for kind in kinds}
    tolerances = []
    for kind, w in workloads.items():
        tolerance = w.start_tolerance_s(plan.options.get(kind) or w.options(None))
        if tolerance is not None:
            tolerances.append(tolerance)
    return SiteNeeds(
        source=plan.source,
        kinds=kinds,
        pair_kinds=tuple(k for k, w in workloads.items() if w.pair()),
        not_pair=not_pair(plan),
        fleet_kinds=tuple(k for k, w in workloads.items() if w.fleet),
        fleet_sizes=tuple(sorted({c.clients for c in plan.cases if get_workload(c.workload).fleet})),
        hosts_unplaced=tuple(k for k, w in workloads.items() if not w.on_hosts()),
        hosts_placeable=tuple(k for k, w in REGISTRY.items() if w.on_hosts()),
        emulated=tuple(p.name for p in plan.profiles if p.emulated),
        timed=tuple(p.name for p in plan.profiles if p.timed()),
        underlay=plan.scenario.topology.underlay,
        flamegraphs=plan.flamegraphs,
        capped=tuple(r.label for r in plan.refs if r.cpu_caps),
        warm=plan.warm,
        cpuset=plan.scenario.run.cpuset,
        programs=program_needs(plan.refs, kinds),
        start_tolerances=tuple(tolerances),
    )
