"""The run scope: what every command that creates host objects enters first.

`with run_scope() as ledger:` makes this process a subreaper (orphans of the processes it starts are
re-parented to it, so none survives as a zombie that keeps a process group alive), opens a fresh ledger
with a new run prefix, and on the way out (success, error, Ctrl-C, SIGTERM turned into an exception)
sweeps whatever the ledger still lists and removes the ledger file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from tunbench.host.clean import finish_ledger
from tunbench.host.ledger import Ledger
from tunbench.host.proc import become_subreaper


@contextmanager
def run_scope() -> Iterator[Ledger]:
    become_subreaper()
    ledger = Ledger.open()
    try:
        yield ledger
    finally:
        # a forked helper unwinding our stack (pyroute2 forks to create a namespace) must not tear the run down
        if os.getpid() == ledger.owner_pid:
            finish_ledger(ledger)
