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
the reason. So is a role perf could not count at all; never a zero. The probe, the parser and one role's
perf stat are monitor/pmu.py's, which a host's agent shares: a role on a host (`--hosts`) is counted there by
its agent's perf (the run's one counter for its hosts chosen when it connects: remote/instructions.py).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from tunbench.monitor import work
from tunbench.monitor.callgrind import InstrWindow
from tunbench.monitor.counters import INSTR_COUNT, INSTR_RUNTIME, short_ifname
from tunbench.monitor.pmu import EVENT, RoleInstructions, probe_perf, whole_reason
from tunbench.perf.flamegraph import find_tool
from tunbench.perf.instructions import DEVICE, FIRST_WINDOW, NO_DAEMON, ROLES, keep
from tunbench.results import TrialRecord
from tunbench.sites.base import Pair
from tunbench.tunnels.tunnel import Tunnel
from tunbench.workloads.base import Context

COUNTERS = ("auto", "perf", "callgrind")
Counter = Literal["perf", "callgrind"]


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
    if counter not in ("perf", "callgrind"):  # on hosts, before the run connects: `auto` or a forced `perf`
        return (
            f"instructions counted by {'perf or callgrind' if counter == 'auto' else counter} ({why}): one counter "
            "for both sides, over each trial, per byte its tunnel device handled"
        )
    if counter == "perf":
        what = (
            f"each role's tunnel processes at full speed, the CPU's own count of {EVENT} (perf stat), Go's runtime "
            "not separated"
        )
    else:
        what = "each role's tunnel daemon under valgrind's simulation, Go's runtime left out"
    return f"instructions counted by {counter} ({why}): {what}, over each trial, per byte its tunnel device handled"


class CountHardwareInstructions:
    """A runner WindowHook (as perf/instructions.py's CountInstructions, without a daemon wrapper: the
    tunnel runs natively): each local role's tunnel processes counted with perf stat `instructions:u` over the
    measured call, stored as `instr.<role>.count`; a role on a host (`--hosts`) by its host's agent with that
    host's perf, switched on and read at the same edges (Pair.instructions_elsewhere with counter "perf",
    remote/instructions.py), with the bytes its tunnel device handled there."""

    def __init__(self, cap: work.Capability | None = None) -> None:
        self.cap = cap if cap is not None else probe()

    @contextlib.contextmanager
    def __call__(self, ctx: Context, tunnel: Tunnel, rec: TrialRecord, pair: Pair) -> Iterator[object]:
        if ctx.baseline:  # the direct baseline has no tunnel to count
            yield None
            return
        notes: dict[str, str] = {}
        remote = any(p.machine for p in (ctx.client, ctx.server))
        elsewhere = pair.instructions_elsewhere(tunnel, "perf") if remote else {}
        pids = roles_to_count(ctx, tunnel, rec, notes, self.cap.why, elsewhere)
        rec.params["instr_sides"] = [role for role in ROLES if tunnel.daemons.get(role) is not None]
        whole = {role: why for role, ps in pids.items() if (why := whole_reason(ps))}
        make: dict[str, Callable[[], work.RoleCount]] = {
            role: functools.partial(RoleInstructions, self.cap, role, ps, ctx.workdir, ctx.ledger)
            for role, ps in pids.items()
        }
        got: dict[str, float | None] = {}
        devices = {role: tunnel.topo.ifname(DEVICE[role]) for role in elsewhere}
        there: dict[str, InstrWindow] = {}
        try:
            with work.count_roles(make, got, notes):
                there = {role: on(devices[role]) for role, on in elsewhere.items() if role not in notes}
                yield None
        finally:
            store(rec, tunnel, got, whole, notes)
            for role, window in there.items():  # each read by its host's agent
                counted = window.read()
                device = short_ifname(devices[role], tunnel.topo.prefix)
                if counted.count is None:
                    rec.params.setdefault("instr", {})[role] = counted.why
                else:
                    keep(rec, role, counted, device)
                    rec.params.setdefault("instr_devices", {})[role] = device


MODES_UNSEEN = (
    "not counted: perf gives one total, with no split by shared object, so it cannot tell the mode the work "
    "gate counts ({mode}) from the other; count this tunnel with --instr-counter callgrind (docs/adapters.md)"
)


def roles_to_count(
    ctx: Context, tunnel: Tunnel, rec: TrialRecord, notes: dict[str, str], why_not: str, elsewhere: Collection[str] = ()
) -> dict[str, list[int]]:
    """The local roles to count and their processes; `notes[role]` says why each other role is not counted
    (the same reasons as the callgrind path's, perf/instructions.py, and this machine's perf's own when it
    cannot count), except the roles in `elsewhere`, which their host counts (and says why not)."""
    places = {"client": ctx.client, "server": ctx.server}
    first_warm = (rec.params.get("warm") or {}).get("window") == 1
    out: dict[str, list[int]] = {}
    for role in ROLES:
        if first_warm:
            notes[role] = FIRST_WINDOW
        elif tunnel.daemons.get(role) is None:
            notes[role] = NO_DAEMON
        elif (spec := tunnel.spec.instructions) is not None:  # wherever it runs: perf's one total
            notes[role] = MODES_UNSEEN.format(mode=spec.mode)
        elif role in elsewhere:
            continue  # its host's agent counts it
        elif places[role].machine:
            notes[role] = "not counted: the role runs on another host (--hosts)"
        elif why_not:
            notes[role] = f"not counted: {why_not}"
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
