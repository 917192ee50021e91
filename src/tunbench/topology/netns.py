"""NetNamespace: a named network namespace that exists exactly as long as its context."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from types import TracebackType

from pyroute2 import IPRoute, netns

from tunbench.proc import run_cmd, stop_group
from tunbench.state import Ledger

log = logging.getLogger(__name__)


def namespace_pids(name: str) -> list[int]:
    """Pids of processes whose network namespace is `name` (ours: tunbench started them all)."""
    res = run_cmd(["ip", "netns", "pids", name], check=False, timeout_s=10)
    return [int(x) for x in res.stdout.split() if x.isdigit()]


def delete_namespace(name: str) -> None:
    """End every process left inside the namespace (by pid), then delete it."""
    for pid in namespace_pids(name):
        stop_group(pid, term_timeout_s=1.0)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(FileNotFoundError, OSError):
        netns.remove(name)


class NetNamespace:
    def __init__(self, name: str, ledger: Ledger) -> None:
        self.name = name
        self._ledger = ledger

    def __enter__(self) -> NetNamespace:
        self._ledger.add_netns(self.name)  # recorded first: a crash in between still gets cleaned
        netns.create(self.name)
        with IPRoute(netns=self.name) as ipr:
            ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        return self

    def ipr(self) -> IPRoute:
        return IPRoute(netns=self.name)

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        try:
            delete_namespace(self.name)
        except Exception as e:  # teardown must never hide the original error
            log.warning("could not delete namespace %s: %s", self.name, e)
        else:
            self._ledger.drop_netns(self.name)
