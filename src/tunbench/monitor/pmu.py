"""A role's instructions as the CPU's PMU counts them, through `perf stat -e instructions:u`: what a local
hook (perf/hwinstr.py) and a host's agent (remote/agent.py, `instr_on` with `counter="perf"`) share, as
monitor/callgrind.py is for callgrind. The perf stat machinery is monitor/work.py's (`Counting`: attached with
its counters off, switched on and off through its control FIFO, its CSV read after), under a file stem of its
own (TAG), so `--count-work` can count the same processes beside it.

perf stat's CSV output (`-x,`) has one line per event: the value (or `<not counted>`, `<not supported>`),
the unit, the event's name, the counter's run time and the share of the window it ran (perf-stat(1), "CSV
FORMAT"); monitor/work.py's parse_stat_rows reads it. A count perf scaled (its counter ran for less than the
whole window) is an estimate, not a count: the role is then not counted, with the reason; so is a role perf
could not count at all. Never a zero.

Go's runtime is not separated: perf stat counts a process as a whole (perf/hwinstr.py says why).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from tunbench.errors import CommandFailed
from tunbench.host.ledger import Ledger
from tunbench.host.proc import run_cmd
from tunbench.monitor import work
from tunbench.monitor.callgrind import Counted, go_binary
from tunbench.monitor.counters import INSTR_COUNT

EVENT = "instructions:u"
"""The instructions a process retired in user space, as the CPU's PMU counts them."""
TAG = "perf-instr"
"""The stem of its perf stat's files in the trial's directory (monitor/work.py's `Counting`)."""
WHOLE = "Go's runtime not separated: perf stat counts a process whole: the whole count is judged"
_INSTRUCTIONS = re.compile(r"^(?:[\w.-]+/)?instructions(?::[A-Za-z]+)?(?:/[A-Za-z]*)?$")


def is_instructions(event: str) -> bool:
    """Whether perf's name for a counter is the instructions event: `instructions:u`, and on a hybrid CPU one
    line per core type (`cpu_core/instructions/u`, `cpu_atom/instructions/u`)."""
    return bool(_INSTRUCTIONS.match(event))


@dataclass(frozen=True)
class Reading:
    """A role's instructions from perf stat's CSV: the count, or why there is none."""

    count: float | None
    why: str = ""


def reading(text: str) -> Reading:
    """The instructions in one perf stat CSV (pure): the sum of its instructions lines (a hybrid CPU prints
    one per core type; a type the processes never ran on reads `<not counted>`). None, with why, when no line
    counted, or when perf scaled a count because its counter ran for less than the window."""
    rows = [r for r in work.parse_stat_rows(text) if is_instructions(r.event)]
    counted = [r for r in rows if r.value is not None]
    if not counted:
        said = ", ".join(dict.fromkeys(r.raw for r in rows)) or "no instructions line"
        return Reading(None, f"perf stat read no {EVENT} ({said})")
    scaled = [r for r in counted if r.running_pct is not None and r.running_pct < 100.0]
    if scaled:
        share = ", ".join(f"{r.event} {r.running_pct:g}%" for r in scaled)
        return Reading(
            None,
            f"perf ran the instructions counter for part of the window only ({share}) and scaled its count: an "
            "estimate, not a count (other events shared the PMU, or a hybrid CPU moved the processes between "
            "core types: place each side on one type with --cpuset)",
        )
    return Reading(sum(r.value for r in counted if r.value is not None))


def capability(perf: str, returncode: int, output: str) -> work.Capability:
    """What `perf stat -x, -e instructions:u true` said (pure): perf can count the event here when it ran and
    read a count; else `why` quotes perf (`<not supported>` where the host has no PMU, as a VM without one)."""
    rows = [r for r in work.parse_stat_rows(output) if is_instructions(r.event)]
    if returncode == 0 and any(r.value is not None for r in rows):  # a share below 100% is a window's concern
        return work.Capability(perf, (EVENT,), hardware=True)
    if rows:
        said = ", ".join(dict.fromkeys(r.raw for r in rows))
    else:
        lines = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
        said = re.sub(r"^Error:\s*", "", " ".join(lines[-2:])) or f"exit status {returncode}"
    pmu = ", no hardware counter (a VM without a PMU, for one)" if "not supported" in said else ""
    return work.Capability(perf, (), f"perf cannot count {EVENT} here: {said}{pmu}")


def probe_perf(perf: str | None) -> work.Capability:
    """Whether `perf` (None: not installed) counts `instructions:u` on this host: a `perf stat` of `true`."""
    if perf is None:
        return work.Capability("", (), "perf is not installed (Debian: apt install linux-perf)")
    try:
        res = run_cmd([perf, "stat", "-x,", "-e", EVENT, "true"], timeout_s=20, check=False)
    except (OSError, CommandFailed) as e:
        return work.Capability(perf, (), f"perf stat failed: {e}")
    return capability(perf, res.returncode, res.stderr)


def whole_reason(pids: Sequence[int]) -> str:
    """Why a role's whole count is judged ("" when it has no Go runtime to leave out): a Go program among its
    processes (monitor/callgrind.py go_binary: the build's .go.buildinfo)."""
    for pid in pids:
        try:
            exe = psutil.Process(pid).exe()
        except psutil.Error:
            continue
        if exe and go_binary(exe)[0]:
            return WHOLE
    return ""


class RoleInstructions:
    """One role's instructions over a window (a monitor/work.py RoleCount): its perf stat attached when made,
    switched on by `start()`, the count read by `finish()` (`why` says why there is none)."""

    def __init__(self, cap: work.Capability, role: str, pids: Sequence[int], workdir: Path, ledger: Ledger) -> None:
        self.role = role
        self.pids = list(pids)
        self._counting = work.Counting(cap, role, pids, workdir, ledger, tag=TAG)

    @property
    def why(self) -> str:
        return self._counting.why

    @why.setter
    def why(self, text: str) -> None:
        self._counting.why = text

    def start(self) -> None:
        self._counting.start()

    def finish(self) -> dict[str, float | None]:
        text = self._counting.stop()
        if text is None:
            return {}
        got = reading(text)
        if got.count is None:
            self.why = got.why
            return {}
        return {INSTR_COUNT.key(role=self.role): got.count}


class PmuWindow:
    """A role's `instructions:u` over one window on this machine (a host's agent, `instr_on` with counter
    "perf"): its perf stat attached to the role's processes and enabled when made (`why` says why it did not
    start), read by `read()` as a callgrind window is (monitor/callgrind.py Counted): the count, Go's runtime
    not separated (`whole`) or, for a program without it, a runtime part of 0, as the local path stores."""

    def __init__(self, cap: work.Capability, role: str, pids: Sequence[int], workdir: Path, ledger: Ledger) -> None:
        self.whole = whole_reason(pids)
        self._count = RoleInstructions(cap, role, pids, workdir, ledger)
        self._count.start()
        self.why = f"not counted: {self._count.why}" if self._count.why else ""

    def read(self) -> Counted:
        """Switch the counter off, stop perf and read its count (never a zero: why, when there is none)."""
        got = self._count.finish().get(INSTR_COUNT.key(role=self._count.role))
        if got is None:
            return Counted(why=f"not counted: {self._count.why or 'perf stat read nothing'}")
        return Counted(got, None if self.whole else 0.0, self.whole)
