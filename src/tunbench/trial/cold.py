"""One attempt of a cold trial (its own bring-up), in the shape its workload takes: N clients (`fleet`),
its own bring-ups (`owns_bringup`), or the client/server pair. A failure is the record's, never the run's."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from tunbench.errors import CommandFailed, DependencyMissing, RetryTrial, TrialError, TunnelError
from tunbench.host.workdir import workdir as host_workdir
from tunbench.plan import PlannedTrial
from tunbench.results import TrialRecord
from tunbench.sites.base import Spot
from tunbench.trial import bringups, fleet, pair
from tunbench.trial.attempt import Attempt, Setup, keep_logs
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
) -> tuple[TrialRecord, bool]:
    """(the record, whether the measurement was void and may be tried again). A retry (`n` > 1) gets names
    of its own (`t7r2`), so nothing an earlier attempt's teardown missed can collide with it."""
    rec = setup.record(pt, options)
    tag = f"t{pt.seq}" + (f"r{n}" if n > 1 else "")
    link_seed = setup.seed + pt.repetition  # reproducible, yet each repetition sees its own pattern
    rec.params["link_seed"] = link_seed
    with host_workdir(setup.ledger, f"t{pt.seq}") as workdir:
        spot = Spot(tag, workdir, setup.spec(pt.case), link_seed)
        void = run(setup, Attempt(pt.case, workload, options, rec, spot))
    return rec, void


def run(setup: Setup, t: Attempt) -> bool:
    """The attempt measured into t.rec; whether it was void (RetryTrial)."""
    rec = t.rec
    void = False
    try:
        shape(t.workload)(setup, t)
    except RetryTrial as e:
        rec.status = "failed"
        rec.error = str(e)
        void = True
    except (TrialError, TunnelError, CommandFailed, DependencyMissing) as e:
        rec.status = "failed"
        rec.error = str(e)
    except Exception as e:  # a bug of ours must not lose the run: record it with its traceback
        rec.status = "failed"
        rec.error = f"internal error: {type(e).__name__}: {e}"
        rec.artifacts["traceback.txt"] = traceback.format_exc().encode()
    finally:
        keep_logs(t)
    return void
