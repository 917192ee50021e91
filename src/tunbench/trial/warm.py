"""Warm windows (PlannedTrial.window, `--warm N`): a warm block brings each of its tunnels up once, side by
side in their own namespaces (named after its first trial, `t7w`), and each of its trials is one measured
window on its running tunnel (the same window and accounting as a cold pair trial's), in the planned
order; everything is torn down when the block ends. A tunnel that fails to come up, or dies in a window,
fails its remaining windows of the block with that error (each keeping the bring-up's logs); a void window
is measured again on the same tunnel, as a void cold trial is (outcome.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable

from tunbench.errors import TunnelError
from tunbench.host.workdir import workdir as host_workdir
from tunbench.metrics import core
from tunbench.plan import PlannedTrial
from tunbench.results import TrialRecord
from tunbench.sites.base import Spot
from tunbench.trial import pair
from tunbench.trial.attempt import Attempt, Setup
from tunbench.trial.outcome import Failure, caught, keep_logs, recorded, with_retries


def run_block(
    setup: Setup,
    block: list[PlannedTrial],
    started: Callable[[PlannedTrial], None],
    done: Callable[[PlannedTrial, TrialRecord], None],
) -> None:
    """The block's tunnels up (all before the first window: every window runs beside the same tunnels),
    then its windows in order; `started` and `done` are told about each trial, `done` as its window ends."""
    with contextlib.ExitStack() as stack:
        held: dict[str, tuple[Attempt, pair.Held | Failure]] = {}  # by tunnel label: a block's cases differ in it
        started(block[0])
        for pt in block:
            if pt.case.tunnel.label not in held:
                held[pt.case.tunnel.label] = warm_up(setup, pt, stack, slot=str(len(held) or ""))
        for n, pt in enumerate(block):
            if n:
                started(pt)
            first, up = held[pt.case.tunnel.label]
            if isinstance(up, Failure):
                t = on_bringup(setup, first, pt)
                up.onto(t.rec)
                keep_logs(t)
                rec = t.rec
            else:
                rec, failed = with_retries(functools.partial(window, setup, first, pt, up))
                if first.rec.seq == pt.seq:
                    rec.metrics[core.SETUP_S.name] = up.tunnel.setup_s  # once per bring-up, with its first window
                if failed is not None and (dead := died(first, up)) is not None:
                    held[pt.case.tunnel.label] = (first, dead)
            done(pt, rec)


def warm_up(
    setup: Setup, pt: PlannedTrial, stack: contextlib.ExitStack, slot: str
) -> tuple[Attempt, pair.Held | Failure]:
    """One tunnel of a warm block brought up on `stack`, or why it could not be (what it entered torn down)."""
    workload, options = setup.workload(pt)
    tag = f"t{pt.seq}w"
    workdir = stack.enter_context(host_workdir(setup.ledger, tag))
    spot = Spot(tag, workdir, setup.spec(pt.case), setup.seed + pt.repetition, slot, pt.case.cores)
    t = Attempt(pt.case, workload, options, setup.record(pt, options), spot)
    with caught() as c, contextlib.ExitStack() as own:
        up = pair.bring_up(setup, t, own)
        stack.enter_context(own.pop_all())
        return t, up
    assert c.failure is not None
    return t, c.failure.within(f"the warm bring-up {tag} failed")


def on_bringup(setup: Setup, first: Attempt, pt: PlannedTrial) -> Attempt:
    """A window's attempt on its tunnel's bring-up (`first`), with a record of its own."""
    rec = setup.record(pt, first.options)
    rec.params["warm"] = {"bringup": first.tag, "window": pt.window}
    rec.params["link_seed"] = first.spot.link_seed
    for key, value in first.rec.params.items():  # what the bring-up recorded holds for every window
        rec.params.setdefault(key, value)
    return dataclasses.replace(first, rec=rec)


def window(setup: Setup, first: Attempt, pt: PlannedTrial, up: pair.Held, n: int) -> tuple[TrialRecord, Failure | None]:
    """The n-th attempt at one window of a warm block, on its tunnel that is up: its record, and why it
    failed (None: it did not)."""
    t = on_bringup(setup, first, pt)
    with recorded(t) as c:
        measured = pair.measure_window(setup, t, up)
        pair.account(t, up, measured, final=False)
    return t.rec, c.failure


def died(first: Attempt, up: pair.Held) -> Failure | None:
    """After a failed window: why its tunnel cannot serve the block's later windows (None: it still can)."""
    try:
        up.tunnel.check_alive()
    except TunnelError as e:
        return Failure(f"the tunnel of {first.tag} died in an earlier window: {e}")
    return None
