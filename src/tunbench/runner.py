"""One run: trials in planned order, each stored as soon as it ends; a void measurement is tried again,
and the stop policies end a run between blocks.

Where the roles run is the site's (sites/), how a trial is measured is its shape's (trial/): the runner
only orders, retries, stops and stores. A warm block (PlannedTrial.window, `--warm N`) is handed whole to
trial/warm.py, which tells the runner about each of its windows as it ends.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable
from typing import Protocol

from tunbench.errors import TrialError
from tunbench.plan import PlannedTrial
from tunbench.results import TrialRecord
from tunbench.store.db import Store
from tunbench.trial import cold, warm
from tunbench.trial.attempt import Setup, WindowHook
from tunbench.trial.outcome import LOG_TAIL_BYTES, MAX_ATTEMPTS, with_retries

__all__ = [
    "LOG_TAIL_BYTES",
    "MAX_ATTEMPTS",
    "Deadline",
    "Runner",
    "StopCheck",
    "StopRun",
    "TrialObserver",
    "WindowHook",
]


class TrialObserver(Protocol):
    """Who watches a run (the CLI's progress bar and per-trial lines): told when each trial starts and ends."""

    def trial_started(self, pt: PlannedTrial) -> None: ...

    def trial_done(self, pt: PlannedTrial, rec: TrialRecord) -> None: ...


class StopRun(TrialError):
    """The stop policy ended the run early (stop_on_error and a trial failed); what ran is stored."""


StopCheck = Callable[[list[PlannedTrial], list[TrialRecord]], str]
"""Asked between two blocks (PlannedTrial.block) with the next block's trials and the records so far: a
reason to end the run there (it ends as done, with the blocks run so far complete), or "" to go on."""


class Deadline:
    """A StopCheck: stop before a block that would not end by `at` (time.monotonic()), at the pace the run's
    trials have kept so far since this object was made; never before `min_blocks` blocks have run."""

    def __init__(self, at: float, *, min_blocks: int = 1) -> None:
        self.at = at
        self.min_blocks = min_blocks
        self.since = time.monotonic()
        self.blocks = 0

    def __call__(self, block: list[PlannedTrial], done: list[TrialRecord]) -> str:
        self.blocks += 1  # asked once after each block but the last
        now = time.monotonic()
        need = (now - self.since) / max(1, len(done)) * len(block)
        if self.blocks < self.min_blocks or now + need <= self.at:
            return ""
        return f"deadline: {max(0.0, self.at - now):.0f} s left, a block takes about {need:.0f} s"


class Runner:
    """Runs a plan's trials on `setup.site`: each stored in `store` under `run_id` as it ends, `observer`
    told when each starts and ends; `stop_on_error` ends the run at the first failed trial, `stop` is asked
    at each block boundary."""

    def __init__(
        self,
        setup: Setup,
        store: Store,
        run_id: int,
        *,
        observer: TrialObserver | None = None,
        stop_on_error: bool = False,
        stop: StopCheck | None = None,
    ) -> None:
        self.setup = setup
        self.store = store
        self.run_id = run_id
        self.observer = observer
        self.stop_on_error = stop_on_error
        self.stop = stop
        self.stopped = ""  # why `stop` ended the run before the plan's last trial ("": it did not)

    def run(self, trials: list[PlannedTrial]) -> list[TrialRecord]:
        """The trials in order, each stored as it ends. `stop` is asked at each block boundary, so a run it
        ends keeps only whole blocks (complete pairs). A warm block's trials are windows on tunnels the
        block brings up once (trial/warm.py)."""
        records: list[TrialRecord] = []
        i = 0
        while i < len(trials):
            pt = trials[i]
            block = list(itertools.takewhile(functools.partial(_same_block, pt.block), trials[i:]))
            if self.stop is not None and i > 0:
                self.stopped = self.stop(block, records)
                if self.stopped:
                    break
            if pt.warm:
                warm.run_block(self.setup, block, self._started, functools.partial(self._done, records=records))
            else:
                for bt in block:
                    self._started(bt)
                    self._done(bt, self.run_trial(bt), records)
            i += len(block)
        return records

    def _started(self, pt: PlannedTrial) -> None:
        if self.observer:
            self.observer.trial_started(pt)

    def _done(self, pt: PlannedTrial, rec: TrialRecord, records: list[TrialRecord]) -> None:
        """A trial ended: stored now (a later crash cannot lose it), shown, and the run's stop policies."""
        self.store.add_trial(self.run_id, rec)
        records.append(rec)
        if self.observer:
            self.observer.trial_done(pt, rec)
        if lost := self.setup.site.lost():
            raise StopRun(
                f"the connection to {', '.join(lost)} was lost: the run stops here (its agent removes what it "
                "started when the connection ends; `tunbench clean --hosts` checks)"
            )
        if self.stop_on_error and rec.status != "ok":
            first = (rec.error.splitlines() or ["failed"])[0]
            raise StopRun(f"stopping at the first failed trial (stop_on_error): {first}")

    def run_trial(self, pt: PlannedTrial) -> TrialRecord:
        """One trial; a void measurement (RetryTrial) is run again from scratch, at most MAX_ATTEMPTS times,
        and the reasons are kept with the record (`params.retried`)."""
        workload, options = self.setup.workload(pt)
        rec, _ = with_retries(functools.partial(cold.attempt, self.setup, pt, workload, options))
        return rec


def _same_block(block: int, pt: PlannedTrial) -> bool:
    return pt.block == block
