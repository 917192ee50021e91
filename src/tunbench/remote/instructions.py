"""Counted instructions on a remote host (`tunbench run --hosts ... --count-instructions`): the controller's
side of the agent's `instr_on` / `instr_read` requests (agent.py). The role's daemon was started under that
host's callgrind (perf/instructions.py wraps it with the valgrind found there); the agent switches it on and
off, dumps, reads and splits the count with monitor/callgrind.py's RoleWindow, Go's runtime named from the
binary on that host, and reads the bytes the role's tunnel device handled over the same span. Where the host
cannot count (valgrind missing) the role is "not counted" with that host's reason, and the run goes on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tunbench.host.place import Proc
from tunbench.monitor.callgrind import Counted
from tunbench.remote.place import RemotePlace, RemoteProc

PROGRAMS = ("valgrind", "callgrind_control", "callgrind_annotate")


class RemoteInstructions:
    """A monitor.callgrind.InstrWindow whose callgrind runs on the role's host: switched on when made, read
    by `read()`. A failure is said in the count's `why` (with the host's name), never raised, except a lost
    host (HostLost fails the trial, as it would anyway)."""

    def __init__(self, place: RemotePlace, role: str, procs: Sequence[Proc], device: str) -> None:
        self.place = place
        keys = [p.key for p in procs if isinstance(p, RemoteProc)]
        r = place.conn.call("instr_on", place=place.key, role=role, procs=keys, device=device)
        self.key: str | None = r["count"]
        self.why = self._on_host(str(r["why"]))

    def _on_host(self, why: str) -> str:
        return f"{why} (on {self.place.conn.name})" if why else ""

    def read(self) -> Counted:
        if self.key is None:
            return Counted(why=self.why)
        r = self.place.conn.call("instr_read", count=self.key)
        self.key = None
        return Counted(
            None if r["count"] is None else float(r["count"]),
            None if r["runtime"] is None else float(r["runtime"]),
            self._on_host(str(r["whole"])),
            self._on_host(str(r["why"])),
            {str(k): float(v) for k, v in (r.get("device_bytes") or {}).items()},
            int(r.get("processes") or 1),
            {str(k): float(v) for k, v in (r.get("objects") or {}).items()},
        )


def instructions_verdict(conn: Any) -> tuple[bool, str, str, str]:
    """`doctor --hosts`'s line for counted instructions on the host behind `conn` (an AgentConnection): (ok,
    name, what it has or lacks, the fix)."""
    have = conn.call("tools", programs=list(PROGRAMS))
    missing = [p for p in PROGRAMS if not have.get(p)]
    if missing:
        return (
            False,
            "counted instructions (callgrind)",
            "missing " + ", ".join(missing),
            "install valgrind there (Debian: apt-get install valgrind); only needed for --count-instructions",
        )
    return True, "counted instructions (callgrind)", "valgrind, callgrind_control and callgrind_annotate", ""
