"""A per-trial watchdog: a workload call that outlives its own time limit fails its trial with a clear
message instead of hanging the run.

It uses the real-time interval timer (SIGALRM), which interrupts the main thread even while it waits on a
child process; the TrialError raised there unwinds the trial's ExitStack, so everything the trial started
is torn down as on any other error. Off the main thread (tests, embedders) it only logs that it is off.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from tunbench.errors import TrialError

log = logging.getLogger(__name__)


@contextlib.contextmanager
def watchdog(limit_s: float, what: str) -> Iterator[None]:
    """Raise TrialError in the `with` block once `limit_s` seconds have passed."""
    if threading.current_thread() is not threading.main_thread() or limit_s <= 0:
        log.debug("watchdog off for %s (not the main thread)", what)
        yield
        return

    def expired(signum: int, frame: FrameType | None) -> None:
        raise TrialError(f"{what} still running after its {limit_s:g} s limit: stopped (the watchdog)")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
