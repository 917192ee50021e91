"""The tunnel's own instructions counted by the CPU (`run --count-instructions`, `--instr-counter perf`, or
`auto` where perf can read a hardware counter), and the choice between that and callgrind.

Where perf can read a hardware counter (bare metal, most arm64 runners), each local role's tunnel processes
are counted with ``perf stat -e instructions:u`` over the measured call: the instructions they retired in user
space, as the PMU counts them, while the tunnel runs natively at full speed (no simulation). The perf stat
machinery is monitor/work.py's (`Counting`: attached before the window with its counters off, switched on
and off through its control FIFO, its CSV read after), under a file stem of its own, so `--count-work` can
count the same processes beside it. The count is stored as ``instr.<role>.count``, the metric callgrind's
path (perf/instructions.py) fills, so the ratios per byte, the work gate and compare apply unchanged. Where
perf cannot (this project's VM: no PMU, ``<not supported>``), valgrind's callgrind counts them by simulation.

The two are not the same figure. callgrind counts the instructions of a simulated CPU, running the daemon
tens of times slower; the PMU counts those of the real one at full speed, where Go's scheduler spins and
parks on another timing. A trial records which counted it (``params.instr_counter``) and compare refuses to
judge a callgrind count against a PMU count (report/compare/verdicts.py).

Go's runtime is not separated here: perf stat counts a process as a whole, with no split by function.
Splitting it would take sampling (``perf record -e instructions:u``), whose attribution to the runtime's
functions is an estimate with an error of its own of about 1/sqrt(samples), or address-range filters,
which perf offers for instruction tracing (Intel PT, CoreSight) and not for counters. So a Go program's
whole count is judged, and the trial says so (``params.instr_whole``), as the callgrind path does for a
stripped build it cannot name. docs/work-gate.md says what that costs in noise.

A count perf scaled (its counter ran for less than the whole window: multiplexed with other events, or a
hybrid CPU's counter of one core type) is an estimate, not a count: the role is then not counted, with
the reason. So is a role perf could not count at all; never a zero.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import psutil

from tunbench.errors import CommandFailed
from tunbench.host.ledger import Ledger
from tunbench.host.proc import run_cmd
from tunbench.monitor import work
from tunbench.monitor.callgrind import go_binary
from tunbench.monitor.counters import INSTR_COUNT, INSTR_RUNTIME, short_ifname
from tunbench.perf.flamegraph import find_tool
from tunbench.perf.instructions import DEVICE, FIRST_WINDOW, NO_DAEMON, ROLES
from tunbench.results import TrialRecord
from tunbench.sites.base import Pair
from tunbench.tunnels.tunnel import Tunnel
from tunbench.workloads.base import Context

EVENT = "instructions:u"
"""The instructions a process retired in user space, as the CPU's PMU counts them."""
COUNTERS = ("auto", "perf", "callgrind")
Counter = Literal["perf", "callgrind"]
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


@functools.cache
def probe() -> work.Capability:
    """This host's perf (probe_perf), probed once per process: the run's plan, its hook and doctor ask it."""
    return probe_perf(find_tool("perf"))


@dataclass(frozen=True)
class Choice:
    """Which counter `--count-instructions` uses, and why (the dry run and `tunbench doctor` say it)."""

    counter: Counter
    why: str


def choose(setting: str, cap: work.Capability | None) -> Choice:
    """The counter for `[run] instr_counter` (`auto`, `perf`, `callgrind`) on a host whose perf can do `cap`
    (pure; None: not probed, as callgrind needs no perf): auto takes perf where it counts `instructions:u`,
    callgrind elsewhere; a forced perf on a host where it cannot leaves every role "not counted" with perf's
    reason."""
    if setting == "callgrind":
        return Choice("callgrind", "--instr-counter callgrind")
    if cap is None:
        raise ValueError(f"instr_counter {setting!r} needs perf's capability probed")
    if setting == "perf":
        return Choice(
            "perf", f"--instr-counter perf; {cap.why}: no role will be counted" if cap.why else "--instr-counter perf"
        )
    if setting != "auto":
        raise ValueError(f"instr_counter must be one of {', '.join(COUNTERS)} (got {setting!r})")
    if cap.available:
        return Choice("perf", f"auto: perf counts {EVENT} here, a hardware counter")
    return Choice("callgrind", f"auto: {cap.why}")


def choice_line(counter: str, why: str) -> str:
    """How the dry run names the counter (`counter`, chosen because `why`) and what it counts."""
    if counter == "perf":
        what = (
            f"each role's tunnel processes at full speed, the CPU's own count of {EVENT} (perf stat), Go's runtime "
            "not separated"
        )
    else:
        what = "each role's tunnel daemon under valgrind's simulation, Go's runtime left out"
    return f"instructions counted by {counter} ({why}): {what}, over each trial, per byte its tunnel device handled"


def whole_reason(pids: Sequence[int]) -> str:
    """Why a role's whole count is judged ("" when it has no Go runtime to leave out): a Go program among its
    processes (instructions.go_binary: the build's .go.buildinfo)."""
    for pid in pids:
        try:
            exe = psutil.Process(pid).exe()
        except psutil.Error:
            continue
        if exe and go_binary(exe)[0]:
            return WHOLE
    return ""


class _RoleInstructions:
    """One role's instructions over a window (a monitor/work.py RoleCount): its perf stat, the count read."""

    def __init__(self, cap: work.Capability, role: str, pids: Sequence[int], workdir: Path, ledger: Ledger) -> None:
        self.role = role
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


class CountHardwareInstructions:
    """A runner WindowHook (as perf/instructions.py's CountInstructions, without a daemon wrapper: the
    tunnel runs natively): each local role's tunnel processes counted with perf stat `instructions:u` over the
    measured call, stored as `instr.<role>.count`."""

    def __init__(self, cap: work.Capability | None = None) -> None:
        self.cap = cap if cap is not None else probe()

    @contextlib.contextmanager
    def __call__(self, ctx: Context, tunnel: Tunnel, rec: TrialRecord, pair: Pair) -> Iterator[object]:
        if ctx.baseline:  # the direct baseline has no tunnel to count
            yield None
            return
        notes: dict[str, str] = {}
        pids = roles_to_count(ctx, tunnel, rec, notes, self.cap.why)
        rec.params["instr_sides"] = [role for role in ROLES if tunnel.daemons.get(role) is not None]
        whole = {role: why for role, ps in pids.items() if (why := whole_reason(ps))}
        make: dict[str, Callable[[], work.RoleCount]] = {
            role: functools.partial(_RoleInstructions, self.cap, role, ps, ctx.workdir, ctx.ledger)
            for role, ps in pids.items()
        }
        got: dict[str, float | None] = {}
        try:
            with work.count_roles(make, got, notes):
                yield None
        finally:
            store(rec, tunnel, got, whole, notes)


MODES_UNSEEN = (
    "not counted: perf gives one total, with no split by shared object, so it cannot tell the mode the work "
    "gate counts ({mode}) from the other; count this tunnel with --instr-counter callgrind (docs/adapters.md)"
)


def roles_to_count(
    ctx: Context, tunnel: Tunnel, rec: TrialRecord, notes: dict[str, str], why_not: str
) -> dict[str, list[int]]:
    """The local roles to count and their processes; `notes[role]` says why each other role is not counted
    (the same reasons as the callgrind path's, perf/instructions.py, and perf's own when it cannot count)."""
    places = {"client": ctx.client, "server": ctx.server}
    first_warm = (rec.params.get("warm") or {}).get("window") == 1
    out: dict[str, list[int]] = {}
    for role in ROLES:
        if first_warm:
            notes[role] = FIRST_WINDOW
        elif why_not:
            notes[role] = f"not counted: {why_not}"
        elif places[role].machine:
            notes[role] = "not counted: the role runs on another host (--hosts)"
        elif tunnel.daemons.get(role) is None:
            notes[role] = NO_DAEMON
        elif (spec := tunnel.spec.instructions) is not None:
            notes[role] = MODES_UNSEEN.format(mode=spec.mode)
        elif not (ps := tunnel.pids(role)):
            notes[role] = f"not counted: {work.NO_PROCESS}"
        else:
            out[role] = ps
    return out


def store(
    rec: TrialRecord,
    tunnel: Tunnel,
    got: Mapping[str, float | None],
    whole: Mapping[str, str],
    notes: Mapping[str, str],
) -> None:
    """A window's counts into the trial: `instr.<role>.count`; for a role without Go's runtime its
    `instr.<role>.runtime` of 0 (as the callgrind path stores for a program in another language); a Go
    program's `params.instr_whole`; the roles' tunnel devices (`params.instr_devices`, what the count is
    divided by: trial/pair.py) and `params.instr` for the roles not counted."""
    counted = [role for role in ROLES if got.get(INSTR_COUNT.key(role=role)) is not None]
    for role in counted:
        rec.metrics[INSTR_COUNT.key(role=role)] = got[INSTR_COUNT.key(role=role)]
        if role in whole:
            rec.params.setdefault("instr_whole", {})[role] = whole[role]
        else:
            rec.metrics[INSTR_RUNTIME.key(role=role)] = 0.0
    if notes:
        rec.params["instr"] = dict(notes)
    if counted:
        topo = tunnel.topo
        rec.params["instr_devices"] = {role: short_ifname(topo.ifname(DEVICE[role]), topo.prefix) for role in counted}


Hook = Callable[[Context, Tunnel, TrialRecord, Pair], contextlib.AbstractContextManager[object]]
"""A runner WindowHook (runner.py), as this layer may name it."""


class Recorded:
    """A counter's WindowHook that records which counter counted the trial (`params.instr_counter`), so that
    compare can tell a simulator's count from a PMU's."""

    def __init__(self, hook: Hook, counter: Counter) -> None:
        self.hook, self.counter = hook, counter

    def __call__(
        self, ctx: Context, tunnel: Tunnel, rec: TrialRecord, pair: Pair
    ) -> contextlib.AbstractContextManager[object]:
        if not ctx.baseline:
            rec.params["instr_counter"] = self.counter
        return self.hook(ctx, tunnel, rec, pair)
