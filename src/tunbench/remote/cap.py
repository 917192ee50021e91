"""A CPU cap on a host: host/cgroup.py's CpuCap (a cgroup-v1 `cpu` group whose CFS quota caps processes) for
processes of a place on a host, made and driven by that host's agent (its cap_* requests).

    with RemoteCpuCap(place) as cap:     # place: a RemotePlace; the cap starts unlimited
        cap.add(place.pids("server", procs))
        cap.limit(10.0)                  # % of one core; None lifts the limit

It has CpuCap's interface, so a site drives either the same way. Enter it before the processes it will hold
start, as a local cap is: leaving it removes the group and kills what is still in it. The agent also removes it
when its place closes, or when the controller goes (the agent's end of input), so a lost host keeps nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from types import TracebackType

from tunbench.remote.place import RemotePlace
from tunbench.remote.protocol import HostLost


class RemoteCpuCap:
    """A CPU cap for processes of `place` on its host (the agent's pids, as RemotePlace.pids gives them)."""

    def __init__(self, place: RemotePlace, period_us: int = 100_000) -> None:
        self.place = place
        self.period_us = period_us  # the CFS period the quota is spent over (the kernel's default: 100 ms)
        self.key: str | None = None

    def __enter__(self) -> RemoteCpuCap:
        self.key = str(self.place.conn.call("cap_open", place=self.place.key, period_us=self.period_us))
        return self

    def add(self, pids: Sequence[int]) -> None:
        self.place.conn.call("cap_add", cap=self._key(), pids=[int(p) for p in pids])

    def limit(self, pct_of_one_core: float | None) -> None:
        self.place.conn.call("cap_limit", cap=self._key(), pct=pct_of_one_core)

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        key, self.key = self.key, None
        if key is not None:
            with contextlib.suppress(HostLost):  # a lost agent removes it on its own (EOF)
                self.place.conn.call("cap_close", cap=key)

    def _key(self) -> str:
        if self.key is None:
            raise RuntimeError("a RemoteCpuCap is used inside its `with` block")
        return self.key
