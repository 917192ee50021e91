"""One attempt of a cold trial (its own bring-up), in the shape its workload takes: N clients (`fleet`),
its own bring-ups (`owns_bringup`), or the client/server pair. A failure is the record's, never the run's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from tunbench.host.workdir import workdir as host_workdir
from tunbench.plan import PlannedTrial
from tunbench.results import TrialRecord
from tunbench.sites.base import Spot
from tunbench.trial import bringups, fleet, pair
from tunbench.trial.attempt import Attempt, Setup
from tunbench.trial.outcome import Failure, recorded
from tunbench.workloads.base import Workload


def shape(workload: Workload[Any, Any]) -> Callable[[Setup, Attempt], None]:
    """How a cold trial of this workload is measured."""
    if workload.fleet:
        return fleet.measure
    if workload.owns_bringup:
        return bringups.measure
    return pair.measure


def attempt(
    setup: Setup, pt: PlannedTrial, workload: Workload[Any, Any], options: BaseModel, n: int = 1
) -> tuple[TrialRecord, Failure | None]:
    """The n-th attempt of a trial: its record, and why it failed (None: it did not; `void`: it may be
    tried again). A retry (`n` > 1) gets names of its own (`t7r2`), so nothing an earlier attempt's
    teardown missed can collide with it."""
    rec = setup.record(pt, options)
    tag = f"t{pt.seq}" + (f"r{n}" if n > 1 else "")
    link_seed = setup.seed + pt.repetition  # reproducible, yet each repetition sees its own pattern
    rec.params["link_seed"] = link_seed
    with host_workdir(setup.ledger, f"t{pt.seq}") as workdir:
        spot = Spot(tag, workdir, setup.spec(pt.case), link_seed, cores=pt.case.cores)
        t = Attempt(pt.case, workload, options, rec, spot)
        with recorded(t) as c:
            shape(workload)(setup, t)
    return rec, c.failure
