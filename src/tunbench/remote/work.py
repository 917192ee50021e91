"""Counted work on a remote host (`tunbench run --hosts ... --count-work`): the controller's side of the
agent's `count_open` / `count_start` / `count_stop` requests (agent.py), a role's perf stat run by the agent
of the host the role is placed on, with the same argv builder and CSV parser as a local run
(monitor/work.py). Its metrics come back as they are; where the host cannot count, the role is "not
counted" with that host's reason, and the run goes on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tunbench.host.place import Proc
from tunbench.monitor.work import Capability
from tunbench.remote.place import RemotePlace, RemoteProc


class RemoteCounting:
    """A monitor.work.RoleCount whose perf runs on the role's host: attached when made, enabled by
    `start()`, stopped and read by `finish()`. A failure is said in `why` (prefixed with the host's name),
    never raised, except a lost host (HostLost fails the trial, as it would anyway)."""

    def __init__(self, place: RemotePlace, role: str, procs: Sequence[Proc]) -> None:
        self.role, self.place = role, place
        keys = [p.key for p in procs if isinstance(p, RemoteProc)]
        r = place.conn.call("count_open", place=place.key, role=role, procs=keys)
        self.key: str | None = r["count"]
        self.why = self._on_host(str(r["why"]))

    def _on_host(self, why: str) -> str:
        return f"{why} (on {self.place.conn.name})" if why else ""

    def start(self) -> None:
        if self.key is not None:
            self.why = self._on_host(str(self.place.conn.call("count_start", count=self.key)))

    def finish(self) -> dict[str, float | None]:
        if self.key is None:
            return {}
        r = self.place.conn.call("count_stop", count=self.key)
        self.key = None
        if r["why"]:
            self.why = self._on_host(str(r["why"]))
        return {str(k): (None if v is None else float(v)) for k, v in r["metrics"].items()}


def count_verdict(conn: Any) -> tuple[bool, str, str, str]:
    """`doctor --hosts`'s line for counted work on the host behind `conn` (an AgentConnection): (ok, name,
    what it can count or why not, the fix)."""
    d = conn.call("count_capability")
    cap = Capability(**{**d, "events": tuple(d["events"])})
    if not cap.available:
        return False, "counted work (perf stat)", cap.why, f"{cap.fix}; only needed for --count-work"
    syscalls = sum(1 for e in cap.events if e.startswith("syscalls:"))
    hw = "instructions and cycles" if cap.hardware else "no hardware counters"
    return True, "counted work (perf stat)", f"software events, {syscalls} syscall tracepoints; {hw}", ""
