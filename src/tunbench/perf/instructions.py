"""The tunnel's own instructions, counted (`tunbench run --count-instructions`, `[run] count_instructions`).

Time-based cost carries the noise of whatever shares the hardware (cache, frequency, the hypervisor); a count of
the instructions a tunnel's process executed does not. Where perf cannot read a hardware counter (a VM without
a PMU, as here), valgrind's callgrind counts them by simulation. Each role's tunnel daemon is started under
callgrind with instrumentation off (``--instr-atstart=no``: it runs at a fraction of its speed until then, and
its start-up is never counted), switched on at the measured call's start and off at its end by
``callgrind_control``, then dumped (``-d``, which also zeroes the counters for the next window) while the
process still runs. The dump's ``totals:`` line is the window's instruction count, stored as
``instr.<role>.count``. Its part outside Go's runtime, per byte the role's tunnel device handled
(``instr.<role>.per_byte``; the two sides' added, ``instr.per_byte``: monitor.counters.instruction_ratios), is
what the work gate judges (report/compare/metrics.py).

Under `--warm`, the first window of each bring-up is not counted: a fresh process's first seconds cost more
instructions per byte than the same process's later windows (its runtime's own warm-up, 5-10% of the whole
count), and that excess varies.

A role that could not be counted says why (``params.instr.<role>``) and has no count: never a zero, never
averaged in. Kernel tunnels (WireGuard in the kernel, XFRM IPsec) do their work in the kernel, where a count
of a process's instructions cannot see it: their roles have no userspace daemon and say so.

A role on another host (``--hosts``) is counted there, by its host's agent, with that host's valgrind (found
there when its daemon is wrapped) and the same code (monitor/callgrind.py's RoleWindow): the site gives a
window counter per such role (Pair.instructions_elsewhere), switched on and read at the hook's edges, which
also brings back the bytes the role's tunnel device handled over the window on its host (a local run reads
them from its namespaces' counters). A host without valgrind says so for its role.

Each dump is also split by function (valgrind's callgrind_annotate): the instructions of Go's runtime
(``instr.<role>.runtime``: its scheduler, channels, locks' slow paths, sync.Pool's queues, allocator and
collector) depend on timing, not on the traffic. Over twelve windows of one fixed UDP load, wireguard-go's count
per packet spread by 2.9-3.7% in all and by 0.3-0.5% outside the runtime as counted before sync.Pool's queues
joined it (docs/work-gate.md). The gate judges the part outside it; a program in another language has no such
functions, and its whole count is judged.

A daemon that forks (socat's process per connection) is counted process by process: valgrind follows each fork
(``--trace-children=yes``) and each process has its own gdbserver, so every live process of the daemon's tree
is switched at the window's edges, a process born inside the window inherits its parent's switch, and one that
ends inside it dumps at its exit; the role's count is the sum of the dumps written during the window
(monitor/callgrind.py's RoleWindow).

A stripped Go build (Debian's wireguard-go) has no symbols, and callgrind names its functions by address:
monitor/gosyms.py names them from the binary's own pclntab, which stripping keeps (on the host that ran it).

Go programs need ``GODEBUG=asyncpreemptoff=1`` under valgrind 3.19: Go's preemption signal otherwise trips
an assertion in callgrind. It is set for every wrapped daemon (other programs ignore it).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from tunbench.host.place import Place
from tunbench.monitor import callgrind
from tunbench.monitor.callgrind import Callgrind, Counted, RoleWindow
from tunbench.monitor.counters import DEV, INSTR_COUNT, INSTR_RUNTIME, short_ifname
from tunbench.results import TrialRecord
from tunbench.sites.base import Pair
from tunbench.tunnels.adapter import InstructionsSpec
from tunbench.tunnels.tunnel import Tunnel
from tunbench.workloads.base import Context

ROLES = ("client", "server")
DEVICE = {"client": "tc", "server": "ts"}
"""The suffix of each role's tunnel device name (the adapters' `dev_client`/`dev_server`)."""
NO_DAEMON = (
    "not counted: no userspace daemon on this side (a kernel tunnel's work is in the kernel; a forward such as "
    "socat runs nothing of its own on the server)"
)
FIRST_WINDOW = (
    "not counted: the first window of a warm bring-up, the process's own warm-up (it read 5-10% more "
    "instructions per byte than the windows after it: docs/work-gate.md)"
)


class CountInstructions:
    """A runner WindowHook, and the daemon wrapper it needs (`wrap_daemon`, passed to the tunnel through the
    trial's Setup): each role's tunnel daemon runs under callgrind, on this machine or on its host; around each
    measured call its instrumentation is switched on, then off, and the counts dumped and read."""

    def __init__(self, tools: Callgrind | None = None) -> None:
        self.tools = tools if tools is not None else callgrind.find()
        self._on_hosts: dict[str, Callgrind] = {}  # each host's valgrind, found once

    def wrap_daemon(
        self, role: str, argv: list[str], env: dict[str, str], place: Place
    ) -> tuple[list[str], dict[str, str]]:
        tools = self.tools_at(place)
        if tools.valgrind is None or tools.control is None:
            return argv, env  # not counted: the window says why
        return callgrind.wrap(tools.valgrind, role, argv, env, place.workdir)

    def tools_at(self, place: Place) -> Callgrind:
        """valgrind's programs where `place` is: this machine's, or its host's (asked there once)."""
        if not place.machine:
            return self.tools
        if place.machine not in self._on_hosts:
            found = place.run(  # one name per `command -v`: dash's answers for the first only
                ["sh", "-c", "for p in valgrind callgrind_control callgrind_annotate; do command -v $p; done"],
                check=False,
                timeout_s=10,
                what="valgrind's programs",
            ).stdout.split()
            paths = {os.path.basename(path): path for path in found}
            self._on_hosts[place.machine] = Callgrind(
                paths.get("valgrind"), paths.get("callgrind_control"), paths.get("callgrind_annotate")
            )
        return self._on_hosts[place.machine]

    @contextlib.contextmanager
    def __call__(self, ctx: Context, tunnel: Tunnel, rec: TrialRecord, pair: Pair) -> Iterator[object]:
        if ctx.baseline:  # the direct baseline has no tunnel to count: nothing to say either
            yield None
            return
        notes: dict[str, str] = {}
        places = {"client": ctx.client, "server": ctx.server}
        topo = tunnel.topo
        devices = {role: topo.ifname(DEVICE[role]) for role in ROLES}
        elsewhere = pair.instructions_elsewhere(tunnel) if any(p.machine for p in places.values()) else {}
        here: dict[str, RoleWindow] = {}
        first_warm = (rec.params.get("warm") or {}).get("window") == 1
        for role in ROLES:
            daemon = tunnel.daemons.get(role)
            if first_warm:
                notes[role] = FIRST_WINDOW
            elif daemon is None:
                notes[role] = NO_DAEMON
            elif role in elsewhere:
                continue  # its host's agent counts it (and says why not)
            elif places[role].machine:  # not this machine, and the site counts it nowhere
                notes[role] = "not counted: the role runs on another host (--hosts)"
            elif self.tools.why_not:
                notes[role] = self.tools.why_not
            else:
                here[role] = RoleWindow(
                    self.tools, tunnel.workdir, role, daemon.pid, control_fn=self._control, runtime_fn=self._runtime,
                    keep_as=f"{rec.seq:03d}-{rec.label}-r{rec.repetition}",
                )  # fmt: skip
        # the sides the tunnel's figure adds up: those that run a daemon (a forward such as socat has none on
        # the server, a kernel tunnel none at all)
        rec.params["instr_sides"] = [role for role in ROLES if tunnel.daemons.get(role) is not None]
        there = {role: on(devices[role]) for role, on in elsewhere.items() if role not in notes}
        started: dict[str, RoleWindow] = {}
        try:
            for role, window in here.items():
                if why := window.on():
                    notes[role] = why
                else:
                    started[role] = window
            yield None
        finally:
            counted = []
            reads = [(role, w.read) for role, w in started.items()] + [(role, w.read) for role, w in there.items()]
            for role, read in reads:
                got = read()
                why = got.why if got.count is None else mode_why(tunnel.spec.instructions, got, role, rec)
                if why:
                    notes[role] = why
                else:
                    keep(rec, role, got, short_ifname(devices[role], topo.prefix))
                    counted.append(role)
            if started:  # beside the dumps, where TUNBENCH_KEEP_DUMPS keeps them
                callgrind.keep_logs(tunnel.workdir, f"{rec.seq:03d}-{rec.label}-r{rec.repetition}")
            if notes:
                rec.params["instr"] = notes
            if counted:  # each side's tunnel device, whose packets the count is divided by (pair.py)
                rec.params["instr_devices"] = {role: short_ifname(devices[role], topo.prefix) for role in counted}

    def _runtime(self, dump: Path) -> callgrind.Split:
        return callgrind.runtime(self.tools, dump)

    def _control(self, workdir: Path, role: str, args: list[str]) -> str:
        return callgrind.control(self.tools, workdir, role, args)


def mode_why(spec: InstructionsSpec | None, got: Counted, role: str, rec: TrialRecord) -> str:
    """Why a counted window is left out: "" unless the adapter names the mode the gate counts
    (`[instructions]`) and the window ran in the other, read from the share of its count in the mode's shared
    object. The share is kept either way (`params.instr_mode.<role>`), so a reader can see both modes, and a
    role left out for it is named in `params.instr_other_mode`."""
    if spec is None or not got.count:
        return ""
    if got.objects is None:  # no split by shared object: a failed count, not a window in the other mode
        said = got.whole.removeprefix("Go's runtime not separated: ") or "callgrind_annotate could not run"
        return f"not counted: its mode ({spec.mode}) could not be read: no split of its count by shared object ({said})"
    share = sum(n for obj, n in got.objects.items() if obj.startswith(spec.mode_object)) / got.count
    rec.params.setdefault("instr_mode", {})[role] = round(share, 5)
    if share >= spec.mode_min_share:
        return ""
    rec.params.setdefault("instr_other_mode", []).append(role)  # left out on purpose (report.compare reads it)
    return (
        f"not counted: not in the mode the gate counts ({spec.mode}): {share:.2%} of its "
        f"{got.count / 1e6:.1f} M instructions in {spec.mode_object}, under {spec.mode_min_share:.0%} "
        "(docs/work-gate.md)"
    )


def keep(rec: TrialRecord, role: str, got: Counted, device: str) -> None:
    """A counted role's window into the record: its count, Go's runtime part (or why the whole count is judged)
    and, where its host read them, its tunnel device's bytes over the window."""
    if got.count is None:
        return
    rec.metrics[INSTR_COUNT.key(role=role)] = got.count
    if got.runtime is not None:
        rec.metrics[INSTR_RUNTIME.key(role=role)] = got.runtime
    if got.whole:
        rec.params.setdefault("instr_whole", {})[role] = got.whole
    if got.processes > 1:  # socat's process per connection: each process's window added up
        rec.params.setdefault("instr_processes", {})[role] = got.processes
    for field, value in got.device_bytes.items():
        rec.metrics[DEV.key(role=role, device=device, field=field)] = value
