"""A workload whose measurement is the bring-up itself (`owns_bringup`: connect): it gets the site's bare
pair bring-up as a function and the site's client machines, and brings tunnels up as often as it
measures, on whichever machines it chooses."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

from tunbench.trial.attempt import Attempt, Setup, merge
from tunbench.tunnels.tunnel import Tunnel
from tunbench.watchdog import watchdog
from tunbench.workloads.base import BringupContext


def measure(setup: Setup, t: Attempt) -> None:
    case, workload, options, rec = t.case, t.workload, t.options, t.rec

    @contextlib.contextmanager
    def bring_up(name: str, machine: str | None) -> Iterator[Tunnel]:
        wd = t.workdir / name
        wd.mkdir()
        spot = dataclasses.replace(t.spot, tag=f"{t.tag}{name}", workdir=wd)
        with setup.site.bare_pair(spot, case.tunnel, case.link, rec.params, machine) as tunnel:
            yield tunnel

    machines = setup.site.client_machines()
    ctx = BringupContext(
        bring_up=bring_up,
        ledger=setup.ledger,
        workdir=t.workdir,
        title=case.title,
        window=setup.window,
        options=options,
        machines=machines,
    )
    # the workload's bring-ups are per client machine: each machine gets the whole limit, with the retries the
    # profile's counted faults cost each of its bring-ups (a stalled WireGuard handshake: 15 s each)
    per_machine = workload.trial_timeout_s(case, options, setup.window) + workload.bringups(options) * case.fault_s
    limit = per_machine * max(1, len(machines))
    with watchdog(limit, f"the {workload.kind} trial"), setup.site.watched(rec.metrics, rec.params, setup.redo.limits):
        result = workload.measure(ctx)
    merge(rec, result)
    if result.window is not None:
        rec.window_s = result.window[1] - result.window[0]
