"""Warm windows (PlannedTrial.window, `--warm N`): a warm block brings each of its tunnels up once, side by
side in their own namespaces (named after its first trial, `t7w`), and each of its trials is one measured
window on its running tunnel (the same window and accounting as a cold pair trial's), in the planned
order; everything is torn down when the block ends. A tunnel that fails to come up, or dies in a window,
fails its remaining windows of the block with that error; a void window is measured again on the same
tunnel."""

from __future__ import annotations

import contextlib
import dataclasses
import traceback
from collections.abc import Callable

from tunbench.errors import CommandFailed, DependencyMissing, RetryTrial, TrialError, TunnelError
from tunbench.host.workdir import workdir as host_workdir
from tunbench.metrics import core
from tunbench.plan import PlannedTrial
from tunbench.results import TrialRecord
from tunbench.sites.base import Spot
from tunbench.trial import pair
from tunbench.trial.attempt import MAX_ATTEMPTS, Attempt, Setup, keep_logs


def run_block(
    setup: Setup,
    block: list[PlannedTrial],
    started: Callable[[PlannedTrial], None],
    done: Callable[[PlannedTrial, TrialRecord], None],
) -> None:
    """The block's tunnels up (all before the first window: every window runs beside the same tunnels),
    then its windows in order; `started` and `done` are told about each trial, `done` as its window ends."""
    with contextlib.ExitStack() as stack:
        held: dict[str, tuple[Attempt, pair.Held | str]] = {}  # by tunnel label: a block's cases differ in it only
        started(block[0])
        for pt in block:
            if pt.case.tunnel.label not in held:
                held[pt.case.tunnel.label] = warm_up(setup, pt, stack, slot=str(len(held) or ""))
        for n, pt in enumerate(block):
            if n:
                started(pt)
            first, up = held[pt.case.tunnel.label]
            rec = setup.record(pt, first.options)
            t = dataclasses.replace(first, rec=rec)
            rec.params["warm"] = {"bringup": first.tag, "window": pt.window}
            rec.params["link_seed"] = first.spot.link_seed
            for key, value in first.rec.params.items():  # what the bring-up recorded holds for every window
                rec.params.setdefault(key, value)
            if isinstance(up, str):
                rec.status, rec.error = "failed", up
            else:
                error = window(setup, t, up)
                if first.rec.seq == pt.seq:
                    rec.metrics[core.SETUP_S.name] = up.tunnel.setup_s  # once per bring-up, with its first window
                if error:
                    held[pt.case.tunnel.label] = (first, error)
            done(pt, rec)


def warm_up(setup: Setup, pt: PlannedTrial, stack: contextlib.ExitStack, slot: str) -> tuple[Attempt, pair.Held | str]:
    """One tunnel of a warm block brought up on `stack`, or why it could not be (its logs kept)."""
    workload, options = setup.workload(pt)
    tag = f"t{pt.seq}w"
    workdir = stack.enter_context(host_workdir(setup.ledger, tag))
    spot = Spot(tag, workdir, setup.spec(pt.case), setup.seed + pt.repetition, slot)
    t = Attempt(pt.case, workload, options, setup.record(pt, options), spot)
    own = contextlib.ExitStack()
    try:
        up = pair.bring_up(setup, t, own)
    except (TrialError, TunnelError, CommandFailed, DependencyMissing) as e:
        own.close()
        logs = "".join(
            f"\n--- {p.name}:\n" + p.read_text(errors="replace")[-2000:] for p in sorted(workdir.glob("*.log"))
        )
        return t, f"the warm bring-up {tag} failed: {e}{logs}"
    except Exception as e:  # a bug of ours must not lose the run: its windows fail with it
        own.close()
        return t, f"internal error in the warm bring-up {tag}: {type(e).__name__}: {e}\n{traceback.format_exc()}"
    except BaseException:
        own.close()
        raise
    stack.enter_context(own)
    return t, up


def window(setup: Setup, t: Attempt, up: pair.Held) -> str:
    """One window of a warm block into t.rec, a void one measured again (at most MAX_ATTEMPTS in all).
    Returns why the tunnel cannot serve the block's later windows ("" when it can)."""
    rec, retried = t.rec, []
    while True:
        try:
            measured = pair.measure_window(setup, t, up)
        except RetryTrial as e:
            retried.append(str(e))
            if len(retried) < MAX_ATTEMPTS:
                rec.metrics.clear()
                continue
            rec.status, rec.error = "failed", str(e)
            break
        except TunnelError as e:
            rec.status, rec.error = "failed", str(e)
            return f"the tunnel of {t.tag} died in an earlier window: {e}"
        except (TrialError, CommandFailed, DependencyMissing) as e:
            rec.status, rec.error = "failed", str(e)
            try:  # a window can fail because the tunnel died: then the later ones must not run on it
                up.tunnel.check_alive()
            except TunnelError as dead:
                return f"the tunnel of {t.tag} died in an earlier window: {dead}"
            break
        except Exception as e:  # a bug of ours must not lose the run: record it with its traceback
            rec.status, rec.error = "failed", f"internal error: {type(e).__name__}: {e}"
            rec.artifacts["traceback.txt"] = traceback.format_exc().encode()
            break
        try:
            pair.account(t, up, measured, final=False)
        except Exception as e:
            rec.status, rec.error = "failed", f"internal error: {type(e).__name__}: {e}"
            rec.artifacts["traceback.txt"] = traceback.format_exc().encode()
        break
    if retried:
        rec.params["retried"] = retried
    keep_logs(t)
    return ""
