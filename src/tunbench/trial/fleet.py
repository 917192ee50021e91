"""N clients through one tunnel server (a workload with `fleet`): the site sets up the clients'
topology, cgroups and the tunnel server; the workload brings the clients up at its own pace and measures.
The watchdog covers the whole trial."""

from __future__ import annotations

from tunbench.metrics import core
from tunbench.trial.attempt import Attempt, Setup, merge
from tunbench.watchdog import watchdog
from tunbench.workloads import fleet_metrics as FM
from tunbench.workloads.base import FleetContext, FleetWorkload, Measurement


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
        mark_lost(result, env.lost_clients(), env.clients_per_host())
    merge(rec, result)
    rec.metrics.update(env.metrics)
    rec.window_s = float(rec.metrics.get(core.WINDOW_S.name) or 0.0)


def mark_lost(result: Measurement, lost: dict[str, str], per_host: dict[str, int]) -> None:
    """The client hosts lost mid-trial, each with its clients and why (`params.clients_lost`), and how many
    clients went with them (`clients.lost`); nothing when none was (pure)."""
    if not lost:
        return
    result.params["clients_lost"] = {
        h: {"clients": per_host.get(h, 0), "reason": why} for h, why in sorted(lost.items())
    }
    result.metrics[FM.LOST.name] = float(sum(per_host.get(h, 0) for h in lost))
