"""N clients through one tunnel server (a workload with `fleet`): the site sets up the clients'
topology, cgroups and the tunnel server; the workload brings the clients up at its own pace and measures.
The watchdog covers the whole trial."""

from __future__ import annotations

from tunbench.metrics import core
from tunbench.trial.attempt import Attempt, Setup, merge
from tunbench.watchdog import watchdog
from tunbench.workloads.base import FleetContext, FleetWorkload


def measure(setup: Setup, t: Attempt) -> None:
    case, workload, options, rec = t.case, t.workload, t.options, t.rec
    assert isinstance(workload, FleetWorkload)
    rec.params["workload"]["clients"] = case.clients
    if case.variant:
        rec.params["workload"]["variant"] = case.variant
    limit = workload.trial_timeout_s(case, options, setup.window)
    env = setup.site.fleet(
        t.spot,
        case.tunnel,
        case.link,
        case.clients,
        cpu_cap=workload.cpu_cap(case),
        probe_interval_s=workload.probe_interval_s(options),
    )
    with watchdog(limit, f"the {workload.kind} trial"), env:
        rec.params.update(env.recorded())
        ctx = FleetContext(
            env=env,
            ledger=setup.ledger,
            workdir=t.workdir,
            title=case.title,
            label=case.label,
            profile=case.profile,
            clients=case.clients,
            variant=case.variant,
            direction=case.direction,
            window=setup.window,
            options=options,
        )
        with setup.site.watched(rec.metrics, rec.params, setup.redo.limits):
            result = workload.measure(ctx)
    merge(rec, result)
    rec.metrics.update(env.metrics)
    rec.window_s = float(rec.metrics.get(core.WINDOW_S.name) or 0.0)
