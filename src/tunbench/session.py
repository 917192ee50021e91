"""`tunbench run` end to end: resolve tunnels and profiles, check dependencies, open the ledger and the
store, run the planned trials with a progress bar, and always tear down and record how the run ended."""

from __future__ import annotations

import hashlib
import os
import signal
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from tunbench import __version__, metadata
from tunbench.clean import finish_ledger
from tunbench.config.load import check_workloads
from tunbench.config.schema import Scenario
from tunbench.config.tomlfile import locate
from tunbench.errors import ConfigError, DependencyMissing, TrialError, TunbenchError
from tunbench.link.profile import Profile, builtin_dir, find_profile, validate_with_link
from tunbench.monitor.counters import HostCounters
from tunbench.plan import Case, PlannedTrial, expand, interleave, skipped
from tunbench.proc import become_subreaper
from tunbench.results import TrialRecord
from tunbench.runner import LinkFactory, Runner, WindowHook
from tunbench.state import Ledger
from tunbench.store.db import Store
from tunbench.topology.build import TopologySpec
from tunbench.tunnels.adapter import tunnel_version
from tunbench.tunnels.registry import TunnelRef, missing_binaries, parse_ref
from tunbench.workloads import get as get_workload

T = TypeVar("T")


@dataclass
class RunOutcome:
    run_id: int
    uid: str
    status: str
    records: list[TrialRecord]


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
    """`text`: the scenario file's text, when run.tunnels came from it (for the line of an error)."""
    refs = _resolve_each(scenario.run.tunnels, parse_ref, source, text, "run.tunnels")
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
    return refs


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
    if ":" not in ref:  # a file (given, or a built-in)
        path = Path(ref) if "/" in ref or ref.endswith(".toml") else builtin_dir() / f"{ref}.toml"
        try:
            line = locate(path.read_text(encoding="utf-8"), e.key.split(".")) if e.key else None
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


def check_dependencies(refs: list[TunnelRef], profiles: list[Profile], kinds: tuple[str, ...] = ()) -> None:
    problems = []
    for r in refs:
        miss = missing_binaries(r)
        if miss:
            problems.append(f"{r.label} needs {', '.join(miss)}")
    from shutil import which

    irtt = ("irtt",) if {"latency", "rrul"} & set(kinds) else ()
    for tool in ("iperf3", "ip", "ping", *irtt):
        if which(tool) is None:
            problems.append(f"the workload needs {tool}")
    if any(p.emulated for p in profiles):
        from tunbench.link.emulator import find_link_binary

        find_link_binary()  # raises DependencyMissing with a hint
    if problems:
        raise DependencyMissing(
            "missing programs: " + "; ".join(problems) + " (run `make deps` or `tunbench doctor` for what to install)"
        )


@contextmanager
def graceful_signals(console: Console) -> Iterator[None]:
    """First Ctrl-C / SIGTERM interrupts the run (KeyboardInterrupt unwinds every context manager);
    further ones are ignored while teardown finishes, so cleanup itself is never cut short."""
    state = {"hit": False}
    main_pid = os.getpid()

    def handler(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != main_pid:
            # a forked helper (pyroute2 forks to enter namespaces) must die, never unwind our stack
            os._exit(128 + signum)
        if state["hit"]:
            console.print("[yellow]still cleaning up, please wait…[/]")
            return
        state["hit"] = True
        raise KeyboardInterrupt

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def expected_s(pt: PlannedTrial, options: Mapping[str, BaseModel], duration_s: float, omit_s: float) -> float:
    """The workload's own estimate of one trial's wall clock (idle phases, client set-up and searches
    included), for the time announced before a run and the progress bar's ETA."""
    workload = get_workload(pt.case.workload)
    opts = options.get(workload.kind) or workload.options(None)
    return workload.expected_s(pt.case.flows, pt.case.direction, opts, duration_s, omit_s)


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


@dataclass
class RunPlan:
    """Everything a run will do, resolved and validated, before anything exists (`--dry-run` prints it)."""

    refs: list[TunnelRef]
    profiles: list[Profile]
    options: dict[str, BaseModel]
    cases: list[Case]
    trials: list[PlannedTrial]
    expected: list[float]  # seconds, per trial
    skipped: list[tuple[str, str, str]]  # (tunnel label, workload, why)
    notes: list[str]  # what a dry run could not check (missing programs)


def plan_run(scenario: Scenario, source: str, *, dry_run: bool = False, text: str = "") -> RunPlan:
    """Resolve tunnels, profiles and workload options and expand the trials. Creates nothing and needs no
    root. A dry run notes missing programs instead of failing on them. `text`: the scenario file's text,
    when the tunnels and profiles came from it (errors then name its lines)."""
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
    trials = interleave(cases, scenario.run.repeat, scenario.run.seed)
    expected = [expected_s(pt, options, wl.duration_s, wl.omit_s) for pt in trials]
    if dry_run:
        try:
            check_dependencies(refs, profiles, tuple(wl.kind))
        except DependencyMissing as e:
            notes.append(str(e))
    return RunPlan(refs, profiles, options, cases, trials, expected, skip, notes)


def skipped_lines(plan: RunPlan) -> list[str]:
    """One line per reason: the tunnel × workload pairs that will not run, and why."""
    by_reason: dict[str, list[str]] = {}
    for label, kind, reason in plan.skipped:
        by_reason.setdefault(reason, []).append(f"{label} × {kind}")
    return [f"note: skipped {', '.join(pairs)}: {reason}" for reason, pairs in by_reason.items()]


def describe(plan: RunPlan, scenario: Scenario) -> list[str]:
    """The plan as text, for `tunbench run --dry-run`."""
    per_case: dict[str, float] = {}
    for pt, e in zip(plan.trials, plan.expected, strict=True):
        per_case[pt.case.title] = e
    lines = [
        "tunnels: " + ", ".join(f"{r.label} ({r.adapter.spec.layer.upper()})" for r in plan.refs),
        "profiles: " + ", ".join(f"{p.name} ({'emulated' if p.emulated else 'veth'})" for p in plan.profiles),
        "workloads: " + ", ".join(scenario.workload.kind),
        f"cases ({len(plan.cases)}):",
        *(f"  {title}  (~{_minutes(e)} per trial)" for title, e in per_case.items()),
        f"{len(plan.cases)} cases × {scenario.run.repeat} repetitions = {len(plan.trials)} trials, "
        f"about {_minutes(sum(plan.expected))} (seed {scenario.run.seed})",
    ]
    return lines


def execute(
    scenario: Scenario,
    *,
    scenario_text: str,
    source: str,
    db_path: Path,
    console: Console,
    link_factory: LinkFactory | None = None,
    flamegraph_dir: Path | None = None,
    ref_text: str = "",
) -> RunOutcome:
    """`flamegraph_dir`: record perf flamegraphs of the tunnel processes, written there (and stored).
    `ref_text`: the scenario file's text when its tunnels and profiles were not overridden (error lines)."""
    plan = plan_run(scenario, source, text=ref_text)
    need_root()
    refs, profiles, options = plan.refs, plan.profiles, plan.options
    cases, trials, expected = plan.cases, plan.trials, plan.expected
    check_dependencies(refs, profiles, tuple(scenario.workload.kind))
    if flamegraph_dir is not None:
        from tunbench.monitor.perf import check_tools

        check_tools()
    if link_factory is None and any(p.emulated for p in profiles):
        from tunbench.link.emulator import link_factory as emulator_factory

        link_factory = emulator_factory
    for line in skipped_lines(plan):
        console.print(f"[yellow]{escape(line)}[/]")
    wl = scenario.workload
    provenance: dict[str, Any] = metadata.collect()
    provenance["tunnels"] = {
        r.label: {
            "adapter": r.name,
            "version": tunnel_version(r),
            "source": r.adapter.source,
            "params": r.merged_params(),
        }
        for r in refs
    }
    provenance["seed"] = scenario.run.seed
    become_subreaper()
    store = Store(db_path)  # before the ledger: a bad --db leaves nothing behind
    try:
        ledger = Ledger.open()
    except BaseException:
        store.close()
        raise
    run_id = store.create_run(
        uid=ledger.prefix,
        name=scenario.run.name,
        tunbench_version=__version__,
        provenance=provenance,
        scenario_text=scenario_text,
        scenario_hash=hashlib.sha256(scenario_text.encode()).hexdigest(),
        scenario=scenario.model_dump(),
    )
    console.print(
        f"run [bold]{ledger.prefix}[/] (#{run_id}): {len(cases)} cases × {scenario.run.repeat} "
        f"repetitions = {len(trials)} trials, about {_minutes(sum(expected))}; results in {db_path}"
    )
    status = "failed"
    records: list[TrialRecord] = []
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[done]}/" + str(len(trials))),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        speed_estimate_period=7 * 24 * 3600.0,  # a trial can outlast rich's default 30 s: keep every sample
    )
    # the bar advances by each trial's estimated seconds, so the ETA weighs a 500-client storm above a ping
    task = progress.add_task("starting", total=sum(expected), done=0)
    weight = {pt.seq: e for pt, e in zip(trials, expected, strict=True)}
    finished: list[int] = []
    hooks: list[WindowHook] = [HostCounters()]  # cheap: always on
    if flamegraph_dir is not None:
        from tunbench.monitor.perf import Flamegraphs

        hooks.append(Flamegraphs(ledger.prefix, flamegraph_dir))

    def on_start(pt: PlannedTrial) -> None:
        progress.update(task, description=f"{pt.case.title} · rep {pt.repetition}")

    def on_done(pt: PlannedTrial, rec: TrialRecord) -> None:
        finished.append(pt.seq)
        progress.update(task, advance=weight[pt.seq], done=len(finished))
        if rec.status == "ok":
            from tunbench.report.terminal import trial_headline

            console.print(f"  [green]✓[/] {escape(pt.case.title)} · rep {pt.repetition}: {trial_headline(rec)}")
            for why in rec.params.get("retried", []):
                console.print(f"      (an earlier attempt was void and run again: {escape(why)})")
        else:
            lines = rec.error.splitlines() or ["failed"]
            console.print(f"  [red]✗[/] {escape(pt.case.title)} · rep {pt.repetition}: {escape(lines[0])}")
            for line in lines[1:40]:  # the tunnel's own log, when it failed
                console.print(f"      {line}", markup=False, highlight=False)
            first = lines[0]
            if scenario.run.stop_on_error:
                raise TrialError(f"stopping at the first failed trial (stop_on_error): {first}")

    runner = Runner(
        ledger=ledger,
        store=store,
        run_id=run_id,
        topology=TopologySpec(
            mtu=scenario.topology.mtu,
            sysctls=dict(scenario.sysctl),
            ipv6=scenario.topology.ipv6,
            congestion_control=scenario.topology.congestion_control,
        ),
        duration_s=wl.duration_s,
        omit_s=wl.omit_s,
        options=options,
        link_factory=link_factory,
        seed=scenario.run.seed,
        on_start=on_start,
        on_done=on_done,
        hooks=hooks,
    )
    try:
        with graceful_signals(console), progress:
            try:
                records = runner.run(trials)
                status = "done"
            except KeyboardInterrupt:
                status = "interrupted"
    finally:
        store.finish_run(run_id, status)
        store.close()
        finish_ledger(ledger)
    return RunOutcome(run_id=run_id, uid=ledger.prefix, status=status, records=records)
