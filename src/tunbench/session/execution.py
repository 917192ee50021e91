"""`tunbench run`, second step: `execute(plan, observer)` records the run in the store, runs the trials on
the plan's site (this machine's namespaces, or the run's hosts) inside a run scope (the ledger and the final
sweep) and always records how the run ended; the observer (the CLI's progress bar) is told when the run
and each trial start and end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tunbench import __version__, metadata
from tunbench.host.ledger import new_uid
from tunbench.host.scope import run_scope
from tunbench.monitor.interference import RedoPolicy
from tunbench.plan import RunPlan
from tunbench.results import TrialRecord
from tunbench.runner import Runner, StopCheck, TrialObserver, WindowHook
from tunbench.session.network import topology_spec
from tunbench.session.place import site_needs
from tunbench.store.db import Store
from tunbench.trial.attempt import Setup
from tunbench.tunnels.tunnel import tunnel_version


@dataclass
class RunOutcome:
    run_id: int
    uid: str
    status: str
    records: list[TrialRecord] = field(default_factory=list)
    stopped: str = ""  # why execute's `stop` ended the run before the plan's last trial ("": it did not)


class RunObserver(TrialObserver, Protocol):
    """Who watches a run: told when it starts (its id, prefix and plan), then about each trial."""

    def run_started(self, run_id: int, uid: str, plan: RunPlan) -> None: ...


def provenance(plan: RunPlan) -> dict[str, Any]:
    """The host and its machine identity, the tools, the build (commit, branch) when given, and each tunnel's
    adapter, version, parameters and, when given (`commit=`), its build's commit; stored with the run."""
    out: dict[str, Any] = metadata.collect()
    out["tunnels"] = {
        r.label: {
            "adapter": r.name,
            "version": tunnel_version(r),
            "source": r.adapter.source,
            "params": r.merged_params(),
            **({"commit": r.commit} if r.commit else {}),
        }
        for r in plan.refs
    }
    out["build"] = {k: v for k, v in (("commit", plan.commit), ("branch", plan.branch)) if v}
    out["seed"] = plan.scenario.run.seed
    return out


def execute(
    plan: RunPlan,
    observer: RunObserver,
    *,
    scenario_text: str,
    db_path: str | Path,
    flamegraph_dir: Path | None = None,
    stop: StopCheck | None = None,
    budget_ends: float | None = None,
) -> RunOutcome:
    """Run a prepared plan: the run is recorded in the store first (a bad --db leaves nothing behind), the
    trials run inside a run scope, and the run's end (done, interrupted, failed) is always recorded.
    Ctrl-C (KeyboardInterrupt) ends the run as `interrupted`, the trials measured so far kept.
    `flamegraph_dir`: where perf flamegraphs of the tunnel processes go (with plan.flamegraphs).
    `stop`: asked between blocks (runner.StopCheck, e.g. runner.Deadline); when it ends the run early, the
    run is done with whole blocks, the plan's trials being the upper bound, and outcome.stopped says why.
    `budget_ends`: when the budget ends (time.monotonic()): a void window is not measured again past it."""
    scenario = plan.scenario
    wl = scenario.workload
    prov = provenance(plan)
    with Store(db_path) as store, run_scope() as ledger, contextlib.ExitStack() as opened:
        site = plan.site.open(opened, ledger, site_needs(plan), prov)
        if scenario.run.count_instructions and (chosen := site.instr_counter()) is not None:
            plan = dataclasses.replace(plan, instr_counter=chosen[0], instr_why=chosen[1])  # the hosts chose it
        uid = new_uid(ledger.prefix)  # the run's identity; the short prefix names what it creates
        run_id = store.create_run(
            uid=uid,
            name=scenario.run.name,
            tunbench_version=__version__,
            provenance=prov,
            scenario_text=scenario_text,
            scenario_hash=hashlib.sha256(scenario_text.encode()).hexdigest(),
            scenario=scenario.model_dump(),
        )
        outcome = RunOutcome(run_id=run_id, uid=uid, status="failed")
        try:
            observer.run_started(run_id, uid, plan)
            hooks: list[WindowHook] = []
            if plan.flamegraphs and flamegraph_dir is not None:
                from tunbench.perf.flamegraph import Flamegraphs

                hooks.append(Flamegraphs(ledger.prefix, flamegraph_dir))
            if scenario.run.count_work:
                from tunbench.perf.count_work import CountWork

                hooks.append(CountWork())
            wrap = None
            if plan.instr_counter == "perf":  # the CPU's own count, the tunnel running natively
                from tunbench.perf.hwinstr import CountHardwareInstructions, Recorded

                hooks.append(Recorded(CountHardwareInstructions(), "perf"))
            elif plan.instr_counter == "callgrind":
                from tunbench.perf.hwinstr import Recorded
                from tunbench.perf.instructions import CountInstructions

                counting = CountInstructions()
                hooks.append(Recorded(counting, "callgrind"))
                wrap = counting.wrap_daemon
            setup = Setup(
                ledger,
                site,
                wl.window,
                topology=topology_spec(scenario),
                options=plan.options,
                seed=scenario.run.seed,
                hooks=tuple(hooks),
                wrap=wrap,
                redo=RedoPolicy.of(
                    scenario.run.redo_steal_pct,
                    scenario.run.redo_interfered,
                    scenario.run.foreign_cpu_pct,
                    until=budget_ends,
                ),
            )
            runner = Runner(
                setup, store, run_id, observer=observer, stop_on_error=scenario.run.stop_on_error, stop=stop
            )
            try:
                outcome.records = runner.run(plan.trials)
                outcome.status = "done"
                outcome.stopped = runner.stopped
            except KeyboardInterrupt:
                outcome.status = "interrupted"
        finally:
            store.finish_run(run_id, outcome.status)
    if store.lost is not None:  # PostgreSQL went away: the rest of the run is in a spool file
        raise store.lost
    return outcome
