"""The preflight checks: what the plan holds that cannot run (no case to run, warm windows out of blocks,
caps or events where they would not apply), and what this machine must have before anything is created
(root, the programs each tunnel and workload needs, perf for flamegraphs). Each refusal names its key."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import BaseModel

from tunbench.config.schema import Scenario
from tunbench.errors import ConfigError, DependencyMissing, TunbenchError
from tunbench.host import HOST_TOOLS
from tunbench.link.profile import Profile
from tunbench.plan import Case, RunPlan
from tunbench.tunnels.registry import TunnelRef, missing_requirements, required_programs
from tunbench.workloads import get as get_workload


def check_cases(cases: list[Case], refs: list[TunnelRef], skip: list[tuple[str, str, str]], source: str) -> None:
    """Refuse a plan with nothing to run: no case, or only the direct baseline's where tunnels were named
    (`skip`: the tunnel × workload pairs left out, and why)."""
    named = [r for r in refs if r.name != "direct"]
    if not cases or (named and all(c.tunnel.name == "direct" for c in cases)):
        why = "; ".join(f"{label} × {kind}: {reason}" for label, kind, reason in skip)
        raise ConfigError(
            f"nothing to run: no tunnel can carry these workloads ({why or 'no case'})",
            source=source,
            key="run.tunnels",
        )


def check_warm_order(scenario: Scenario, source: str) -> None:
    """Warm windows alternate the tunnels of a block, so warm > 1 needs the blocks order."""
    if scenario.run.warm > 1 and scenario.run.order != "blocks":
        raise ConfigError(
            "warm windows alternate the tunnels of a block: warm > 1 needs order = 'blocks'",
            source=source,
            key="run.warm",
        )


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
    was settled) instead of being silently ignored. Faults are refused where events are, but for a workload
    that measures its own bring-ups (connect): each has an emulator of its own, from whose start a fault's
    `nth`, `first` and `every` count (a fault `during` a span follows the schedule, as events do)."""
    for kind in plan.scenario.workload.kind:  # a workload with nothing to measure over a profile
        for prof in plan.profiles:
            if why := get_workload(kind).profile_problem(prof):
                raise ConfigError(why, source=plan.source, key="run.profiles")
    scheduled = [p.name for p in plan.profiles if p.timed() or p.faults]
    if not scheduled:
        return
    why = ""
    if kind := not_pair(plan):
        why = f"workload {kind!r} brings up many clients or its own tunnels"
        if get_workload(kind).owns_bringup and not any(get_workload(k).fleet for k in plan.scenario.workload.kind):
            scheduled = [p.name for p in plan.profiles if p.timed()]  # counted faults apply to each bring-up
    elif plan.warm > 1:
        why = f"warm = {plan.warm} measures several windows per bring-up, and the events run once"
    if why and scheduled:
        raise ConfigError(
            f"profile(s) {', '.join(scheduled)} change over time (events, a trace, faults), which start with the "
            f"client/server pair's traffic: {why}; use a profile without events, traces or faults there",
            source=plan.source,
            key="run.profiles",
        )


def check_machine(plan: RunPlan, *, dry_run: bool) -> None:
    """What this machine must have for the plan, before anything is created: the programs named by path,
    in a dry run too; then, unless a dry run (which notes missing programs in plan.notes instead of failing),
    root, every program the tunnels and workloads need, and perf for flamegraphs. The programs only where
    they run here (SiteChoice.programs_here): elsewhere the site checks each machine's own once connected."""
    refs, profiles = plan.refs, plan.profiles
    kinds = tuple(plan.scenario.workload.kind)
    here = plan.site.programs_here
    if here:
        check_named_files(refs)
    if dry_run:
        try:  # valgrind where the roles run: on hosts, each host's (its roles say when it has none)
            check_dependencies(refs, profiles, kinds, plan.instr_counter == "callgrind" and here, plan.options)
        except DependencyMissing as e:
            plan.notes.append(str(e))
        return
    need_root()
    if here:
        check_dependencies(refs, profiles, kinds, plan.instr_counter == "callgrind", plan.options)
    if plan.flamegraphs:
        from tunbench.perf.flamegraph import check_tools

        check_tools()


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
    refs: list[TunnelRef],
    profiles: list[Profile],
    kinds: tuple[str, ...] = (),
    count_instructions: bool = False,
    options: Mapping[str, BaseModel] | None = None,
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
        for tool in get_workload(kind).programs((options or {}).get(kind)):
            if shutil.which(tool) is None:
                problems.append(f"the workload {kind} needs {tool}")
    if any(p.emulated for p in profiles):
        from tunbench.link.binary import link_binary_or_none

        if link_binary_or_none() is None:
            problems.append("emulated profiles need tunbench-link (`make build`, or set TUNBENCH_LINK)")
    if count_instructions:
        problems += [
            f"--count-instructions (counted by callgrind) needs {tool}"
            for tool in INSTRUCTION_TOOLS
            if shutil.which(tool) is None
        ]
    if problems:
        raise DependencyMissing(
            "missing programs: " + "; ".join(problems) + " (run `make deps` or `tunbench doctor` for what to install)"
        )


def program_needs(
    refs: list[TunnelRef], kinds: Iterable[str], options: Mapping[str, BaseModel] | None = None
) -> dict[str, list[str]]:
    """Who needs which programs on a machine that runs its roles: tunbench itself, each tunnel (`requires`)
    and each workload (with its options, where given: rr's generator); what `--hosts` checks on every host
    and `doctor --hosts` lists per host."""
    needs = {"tunbench": list(HOST_TOOLS)}
    needs |= {f"tunnel {r.label}": required_programs(r) for r in refs}
    needs |= {f"workload {kind}": list(get_workload(kind).programs((options or {}).get(kind))) for kind in kinds}
    return needs
