"""How an attempt ends, the same for every trial shape: one ladder from what it raised to its record's
outcome (`caught`, `recorded`), one loop that measures a void attempt again (`with_retries`), and one size of
log tail kept with a failed record (`keep_logs`).

The ladder: a void measurement (RetryTrial) fails the attempt and may be measured again; an error tunbench
expects (a trial, tunnel, command or dependency error) fails it with its message; anything else is a bug of
ours, which fails it as an internal error with its traceback, so it never loses the run. An interrupt
(KeyboardInterrupt: Ctrl-C, SIGTERM) is not an outcome: it passes through, and every context unwinds.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tunbench.errors import CommandFailed, DependencyMissing, RetryTrial, TrialError, TunnelError
from tunbench.results import TrialRecord
from tunbench.trial.attempt import Attempt

LOG_TAIL_BYTES = 65536  # of each log file a trial keeps
MAX_ATTEMPTS = 5  # a void measurement (RetryTrial) is tried this many times in all
EXPECTED = (TrialError, TunnelError, CommandFailed, DependencyMissing)  # a failed trial, not a bug of ours


@dataclass(frozen=True)
class Failure:
    """Why an attempt failed: its error as the record says it; `void`: the measurement is void and may be
    measured again (RetryTrial); `traceback`: a bug's, kept with the record."""

    error: str
    void: bool = False
    traceback: str = ""

    def onto(self, rec: TrialRecord) -> None:
        """`rec` failed with this failure."""
        rec.status, rec.error = "failed", self.error
        if self.traceback:
            rec.artifacts["traceback.txt"] = self.traceback.encode()

    def within(self, what: str) -> Failure:
        """The same failure said of `what` ("the warm bring-up t7w failed: ..."), no longer void."""
        return Failure(f"{what}: {self.error}", traceback=self.traceback)


def failure(e: Exception) -> Failure:
    """The one ladder: what an attempt that raised `e` records."""
    if isinstance(e, RetryTrial):
        return Failure(str(e), void=True)
    if isinstance(e, EXPECTED):
        return Failure(str(e))
    return Failure(f"internal error: {type(e).__name__}: {e}", traceback="".join(traceback.format_exception(e)))


class Caught:
    """What a `caught` block raised, as a Failure (None: nothing)."""

    failure: Failure | None = None


@contextlib.contextmanager
def caught() -> Iterator[Caught]:
    """`with caught() as c:` an exception the block raises ends it, as c.failure (the ladder's); an
    interrupt passes through."""
    c = Caught()
    try:
        yield c
    except Exception as e:
        c.failure = failure(e)


@contextlib.contextmanager
def recorded(t: Attempt) -> Iterator[Caught]:
    """`with recorded(t) as c:` the attempt measured: a failure goes into t.rec (and c.failure), and its logs
    are kept however the block ends, interrupted too (`keep_logs`)."""
    try:
        with caught() as c:
            yield c
        if c.failure is not None:
            c.failure.onto(t.rec)
    finally:
        keep_logs(t)


def keep_logs(t: Attempt) -> None:
    """Store the last LOG_TAIL_BYTES of the attempt's logs with its record: when it failed, or always for a
    workload whose answer they are part of (`Workload.keeps_logs`)."""
    if t.rec.status != "ok" or t.workload.keeps_logs:
        for log in sorted(t.workdir.glob("*.log")):
            t.rec.artifacts[f"log/{log.name}"] = log.read_bytes()[-LOG_TAIL_BYTES:]


Attempted = Callable[[int], tuple[TrialRecord, Failure | None]]
"""The n-th attempt of one measurement (n = 1, 2, ...): its own record, and why it failed (None: it did not)."""


def with_retries(attempt: Attempted) -> tuple[TrialRecord, Failure | None]:
    """The one retry loop: the attempts in turn while one is void, at most MAX_ATTEMPTS in all; the last
    one's record and failure, with the reasons of those measured again in `params.retried`."""
    retried: list[str] = []
    while True:
        rec, failed = attempt(len(retried) + 1)
        if failed is None or not failed.void or len(retried) + 1 >= MAX_ATTEMPTS:
            break
        retried.append(rec.error)
    if retried:
        rec.params["retried"] = retried
    return rec, failed
