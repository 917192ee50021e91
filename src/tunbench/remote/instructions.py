"""Counted instructions on a remote host (`tunbench run --hosts ... --count-instructions`): the controller's
side of the agent's `instr_on` / `instr_read` requests (agent.py), and which counter each host can use.

With callgrind, the role's daemon was started under that host's callgrind (perf/instructions.py wraps it with
the valgrind found there); the agent switches it on and off, dumps, reads and splits the count with
monitor/callgrind.py's RoleWindow, Go's runtime named from the binary on that host. With perf (`counter=
"perf"`, where the host's perf reads the PMU's `instructions:u`), the agent attaches perf stat to the role's
processes, running natively, at `instr_on` and reads its count at `instr_read` (monitor/pmu.py), at the same
edges. Either way it reads the bytes the role's tunnel device handled over the same span. Where the host
cannot count (valgrind missing, perf refused) the role is "not counted" with that host's reason, and the run
goes on.

Which counter a run uses on hosts (`host_counter`, `run_counter`) is one for all the hosts it counts on: a
trial's figure adds its two sides' counts, and a simulator's count and a PMU's are not the same figure (compare
refuses to judge one against the other), so a side on a host without a PMU makes `auto` use callgrind on both,
and a forced `perf` an error naming that host."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tunbench.errors import DependencyMissing
from tunbench.host.place import Proc
from tunbench.monitor.callgrind import Counted
from tunbench.remote.place import RemotePlace, RemoteProc

PROGRAMS = ("valgrind", "callgrind_control", "callgrind_annotate")


class RemoteInstructions:
    """A monitor.callgrind.InstrWindow whose callgrind runs on the role's host: switched on when made, read
    by `read()`. A failure is said in the count's `why` (with the host's name), never raised, except a lost
    host (HostLost fails the trial, as it would anyway)."""

    def __init__(
        self, place: RemotePlace, role: str, procs: Sequence[Proc], device: str, counter: str = "callgrind"
    ) -> None:
        self.place = place
        keys = [p.key for p in procs if isinstance(p, RemoteProc)]
        r = place.conn.call("instr_on", place=place.key, role=role, procs=keys, device=device, counter=counter)
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
            None if r.get("objects") is None else {str(k): float(v) for k, v in r["objects"].items()},
        )


def instructions_verdict(conn: Any) -> tuple[bool, str, str, str]:
    """`doctor --hosts`'s line for counted instructions on the host behind `conn` (an AgentConnection): (ok,
    name, which counter `--instr-counter auto` uses there and why, the fix). perf where the host's perf counts
    `instructions:u` (its PMU); else callgrind, with perf's reason, which needs valgrind there."""
    name = "counted instructions (--count-instructions)"
    can_perf = str(conn.call("instr_capability")["why"])
    counter, why = host_counter("auto", can_perf)
    if counter == "perf":
        return True, name, f"perf: {why.removeprefix('auto: ')}, a hardware counter; the tunnel runs natively", ""
    have = conn.call("tools", programs=list(PROGRAMS))
    why = why.removeprefix("auto: ")
    if missing := [p for p in PROGRAMS if not have.get(p)]:
        return (
            False,
            name,
            f"callgrind ({why}), but missing " + ", ".join(missing),
            "install valgrind there (Debian: apt-get install valgrind); only needed for --count-instructions",
        )
    return True, name, f"callgrind, by simulation, as {why}", ""


def host_counter(setting: str, can_perf: str) -> tuple[str, str]:
    """The counter one host would use for `[run] instr_counter` (`auto`, `perf`, `callgrind`) and why (pure;
    `can_perf`: "" where its perf counts `instructions:u`, else perf's reason): `doctor --hosts`'s line."""
    if setting == "callgrind":
        return "callgrind", "--instr-counter callgrind"
    if not can_perf:
        return "perf", f"{'auto' if setting == 'auto' else '--instr-counter perf'}: perf counts instructions:u there"
    if setting == "perf":
        return "", f"--instr-counter perf, but {can_perf}"
    return "callgrind", f"auto: {can_perf}"


def run_counter(setting: str, hosts: Mapping[str, str]) -> tuple[str, str]:
    """The counter a run uses on the hosts that run its counted roles (`hosts`: name -> "" where its perf counts
    `instructions:u`, else perf's reason) and why (pure): one for all of them (the module docstring). A forced
    `perf` that a host cannot do raises DependencyMissing naming the host."""
    if setting == "callgrind":
        return "callgrind", "--instr-counter callgrind"
    refused = {name: why for name, why in hosts.items() if why}
    names = ", ".join(hosts)
    if setting == "perf":
        if refused:
            raise DependencyMissing(
                "--instr-counter perf: "
                + "; ".join(f"host {name} cannot count instructions:u: {why}" for name, why in refused.items())
                + " (use --instr-counter auto, which falls back to callgrind, or callgrind; `tunbench doctor "
                "--hosts` says which counter each host can use)"
            )
        return "perf", f"--instr-counter perf: perf counts instructions:u on {names}"
    if refused:
        said = "; ".join(f"host {name}: {why}" for name, why in refused.items())
        return "callgrind", f"auto: {said} (one counter for both sides: callgrind on {names})"
    return "perf", f"auto: perf counts instructions:u on {names}, a hardware counter"
