"""Counted work per role (`tunbench run --count-work`): how many syscalls, context switches (voluntary
and preempted), CPU migrations and page faults each side's tunnel processes made over the measured
window, and the ratios a tunnel developer reasons with (syscalls and context switches per MB, packets per
send/recv syscall, bytes per wake-up). docs/counted-work.md explains each figure.

`perf stat` counts them in the kernel (software events and syscall tracepoints; hardware `instructions`
and `cycles` where the host has them): one perf process per role, attached to the role's pids at the
window's start (started disabled, enabled through its control FIFO and acknowledged, so nothing is
missed or counted early), disabled the same way at the end and stopped with SIGINT, its `-x,` CSV read
then. Nothing polls in between: the harness stays quiet during the window. A process that exits during
the window is counted up to its exit, and the trial says so (`work.<role>.exited`).

The argv builder, the CSV parser and the ratios are pure and tested on captured perf output.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import select
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tunbench.errors import CommandFailed, TunbenchError
from tunbench.host.ledger import Ledger
from tunbench.host.proc import Daemon, run_cmd
from tunbench.metrics import Better, Format, MetricSpec, declare
from tunbench.monitor.counters import COUNTER, DEV, carried_bytes
from tunbench.monitor.irqtime import SOFTIRQ_S

SYSCALL_COUNT = declare(
    "work.{role}.syscalls", "count", "lower", "info", "System calls of a side's tunnel processes over the window."
)
SYSCALL = declare(
    "work.{role}.syscalls.{syscall}", "count", "lower", "info", "Calls of one system call (read, sendmmsg, ...)."
)
CTX_SWITCHES = declare("work.{role}.ctx_switches", "count", "lower", "info", "A side's context switches.")
CTX_KIND = declare(
    "work.{role}.ctx_switches.{kind}", "count", "lower", "info",
    "A side's context switches, `voluntary` (it waited) or `involuntary` (it was preempted).",
    choices={"kind": ("voluntary", "involuntary")},
)  # fmt: skip
EVENT = declare(
    "work.{role}.{event}", "count", "lower", "info",
    "A side's hardware event count over the window, where perf could count it.",
    choices={"event": ("instructions", "cycles")},
)  # fmt: skip
PROCESSES = declare("work.{role}.processes", "count", "none", "info", "The processes perf stat counted on a side.")
EXITED = declare(
    "work.{role}.exited",
    "count",
    "none",
    "info",
    "Counted processes that exited in the window.",
)


def _declare_ratio(name: str, title: str, better: Better, unit: str, suffix: str, text: str) -> MetricSpec:
    """A counted-work ratio (`work.<role>.<ratio>`): an explanation, never gating (docs/counted-work.md)."""
    words = ("more batched", "less batched") if better == "higher" else ("less work", "more work")
    return declare(name, unit, better, "work", text, title=title, fmt=Format(4, 1.0, suffix), words=words)


RATIOS = (
    _declare_ratio("work.{role}.syscalls_per_mb", "syscalls/MB {role}", "lower", "/MB", "/MB",
                   "System calls per MB the side's underlay carried."),
    _declare_ratio("work.{role}.ctx_switches_per_mb", "ctx switches/MB {role}", "lower", "/MB", "/MB",
                   "Context switches per MB."),
    _declare_ratio("work.{role}.read_per_mb", "reads/MB {role}", "lower", "/MB", "/MB", "read() calls per MB."),
    _declare_ratio("work.{role}.write_per_mb", "writes/MB {role}", "lower", "/MB", "/MB", "write() calls per MB."),
    _declare_ratio("work.{role}.packets_per_send", "packets/send {role}", "higher", "", "",
                   "Underlay packets sent per send system call (sendmmsg, sendmsg, sendto)."),
    _declare_ratio("work.{role}.packets_per_recv", "packets/recv {role}", "higher", "", "",
                   "Underlay packets received per receive system call, less the receive buffers' drops."),
    _declare_ratio("work.{role}.bytes_per_wakeup", "bytes/wake-up {role}", "higher", "bytes", "B",
                   "Underlay bytes per voluntary context switch."),
    _declare_ratio("work.{role}.softirq_ms_per_mb", "softirq ms/MB {role}", "lower", "ms/MB", "ms/MB",
                   "Softirq milliseconds per MB, where the side's CPUs are its own."),
    _declare_ratio("work.{role}.instructions_per_byte", "instructions/byte {role}", "lower", "", "",
                   "Instructions per underlay byte (perf stat)."),
    _declare_ratio("work.{role}.cycles_per_byte", "cycles/byte {role}", "lower", "", "",
                   "Cycles per underlay byte (perf stat)."),
)  # fmt: skip
"""The counted-work ratios, in the order compare shows them."""
RATIO = {spec.name.rsplit(".", 1)[1]: spec for spec in RATIOS}

log = logging.getLogger(__name__)

BASE_EVENTS = {  # perf event -> metric suffix
    "raw_syscalls:sys_enter": "syscalls",
    "context-switches": "ctx_switches",
    "cpu-migrations": "migrations",
    "page-faults": "page_faults",
}
HARDWARE_EVENTS = {"instructions": "instructions", "cycles": "cycles"}
# the switches away from a task that was still runnable (prev_state 0): it was preempted, not waiting; the rest
# of the context switches are voluntary (it blocked: a wake-up ends each)
PREEMPTED = "sched:sched_switch"
PREEMPTED_FILTER = "prev_state == 0"
SYSCALLS = (
    "sendmmsg",
    "recvmmsg",
    "sendmsg",
    "recvmsg",
    "sendto",
    "recvfrom",
    "read",
    "write",
    "readv",
    "writev",
    "epoll_wait",
    "epoll_pwait",
    "poll",
    "ppoll",
    "io_uring_enter",
)
SEND_FAMILY = ("sendmmsg", "sendmsg", "sendto")
RECV_FAMILY = ("recvmmsg", "recvmsg", "recvfrom")
TRACEFS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
ACK_TIMEOUT_S = 5.0
NO_PROCESS = "no tunnel process on this side"
MB = 1e6


@dataclass(frozen=True)
class Capability:
    """What this host lets perf count: the events (perf names), or `why` not ("" when it can) and the `fix`."""

    perf: str
    events: tuple[str, ...]
    why: str = ""
    hardware: bool = False
    fix: str = ""  # what to install or set, when it cannot count

    @property
    def available(self) -> bool:
        return not self.why


def syscall_event(name: str) -> str:
    return f"syscalls:sys_enter_{name}"


def present_syscalls(tracefs: Sequence[Path] = TRACEFS) -> tuple[str, ...]:
    """The syscalls of SYSCALLS whose entry tracepoint this kernel has."""
    for root in tracefs:
        d = root / "events" / "syscalls"
        with contextlib.suppress(OSError):
            if d.is_dir():
                return tuple(s for s in SYSCALLS if (d / f"sys_enter_{s}").is_dir())
    return ()


def event_args(events: Sequence[str]) -> list[str]:
    """perf's `-e` arguments for `events`; the preempted-switch tracepoint on its own, with its filter."""
    args = ["-e", ",".join(e for e in events if e != PREEMPTED)]
    return [*args, "-e", PREEMPTED, "--filter", PREEMPTED_FILTER] if PREEMPTED in events else args


def _has_tracepoint(group: str, name: str, tracefs: Sequence[Path] = TRACEFS) -> bool:
    return any((root / "events" / group / name).is_dir() for root in tracefs)


def stat_argv(perf: str, pids: Sequence[int], events: Sequence[str], out: Path, ctl: Path, ack: Path) -> list[str]:
    """perf stat on `pids`, CSV to `out`, started with its counters disabled (`-D -1`) and driven through
    the control FIFOs `ctl` / `ack`."""
    return [
        perf,
        "stat",
        "-x,",
        "--no-big-num",
        "-D",
        "-1",
        "--control",
        f"fifo:{ctl},{ack}",
        *event_args(events),
        "-p",
        ",".join(str(p) for p in pids),
        "-o",
        str(out),
    ]


@dataclass(frozen=True)
class StatRow:
    """One counter line of `perf stat -x,` output: the event as perf names it, its count (None: `<not
    counted>`, `<not supported>`) and the share of the time it was enabled that it ran on the PMU, in percent
    (below 100: perf multiplexed it and scaled the count up to an estimate)."""

    event: str
    value: float | None
    running_pct: float | None
    raw: str = ""  # the count as perf printed it (`<not supported>`, `<not counted>`, a number)


def parse_stat_rows(text: str) -> list[StatRow]:
    """`perf stat -x,` output -> its counter lines (value, unit, event, run time, running %, ...: perf-stat(1),
    "CSV FORMAT"). Comment, blank and metric-only lines are skipped."""
    out: list[StatRow] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split(",")
        if len(fields) < 3:
            continue
        value, event = fields[0].strip(), fields[2].strip()
        if not event:
            continue
        pct = fields[4].strip() if len(fields) > 4 else ""
        out.append(
            StatRow(
                event,
                float(value) if re.fullmatch(r"\d+(\.\d+)?", value) else None,
                float(pct) if re.fullmatch(r"\d+(\.\d+)?", pct) else None,
                value,
            )
        )
    return out


def parse_stat_csv(text: str) -> dict[str, float | None]:
    """`perf stat -x,` output -> {event: count}; None for an event perf could not count (`<not counted>`,
    `<not supported>`). Comment and blank lines are skipped; a multiplexed count (running < 100% of the
    time) is scaled as perf prints it."""
    return {row.event: row.value for row in parse_stat_rows(text)}


def role_metrics(role: str, counts: Mapping[str, float | None]) -> dict[str, float | None]:
    """The `work.<role>.*` metrics from one role's counts (pure)."""
    m: dict[str, float | None] = {}
    for event, name in {**BASE_EVENTS, **HARDWARE_EVENTS}.items():
        if event in counts:
            m[EVENT.key(role=role, event=name)] = counts[event]
    for name in SYSCALLS:
        if syscall_event(name) in counts:
            m[SYSCALL.key(role=role, syscall=name)] = counts[syscall_event(name)]
    total, preempted = counts.get("context-switches"), counts.get(PREEMPTED)
    if total is not None and preempted is not None:
        m[CTX_KIND.key(role=role, kind="involuntary")] = preempted
        m[CTX_KIND.key(role=role, kind="voluntary")] = max(0.0, total - preempted)
    return m


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


def _sum(metrics: Mapping[str, float | None], keys: Sequence[str]) -> float | None:
    vals = [metrics.get(k) for k in keys]
    present = [v for v in vals if v is not None]
    return sum(present) if present else None


def _received(metrics: Mapping[str, float | None], role: str, rx_packets: float | None) -> float | None:
    """The underlay packets that reached a recv: those the UDP receive buffers dropped never did, and are
    not the process's batching. The drops are datagrams and the device counts packets, which differ when IP
    fragments a datagram: the packets are then scaled by the share of datagrams delivered to a socket
    (`udp_in_datagrams`); without that counter, the drops are taken as one packet each."""
    if rx_packets is None:
        return None
    dropped = metrics.get(COUNTER.key(role=role, counter="udp_rcvbuf_errors")) or 0.0
    delivered = metrics.get(COUNTER.key(role=role, counter="udp_in_datagrams"))
    if delivered is None:
        return max(0.0, rx_packets - dropped)
    return rx_packets * delivered / (delivered + dropped) if delivered + dropped else rx_packets


def ratios(metrics: Mapping[str, float | None], underlay: Mapping[str, str]) -> dict[str, float | None]:
    """The derived ratios per counted role (pure), over the bytes and packets the role's underlay device
    carried in the window, both directions (`counters.<role>.dev.<dev>.{rx,tx}_{bytes,packets}`): syscalls
    and context switches per MB, bytes per wake-up (a voluntary context switch), packets per send syscall (tx packets
    / sendmmsg+sendmsg+sendto) and per receive syscall (rx packets less those the UDP receive buffers
    dropped, `_received`, / recvmmsg+recvmsg+recvfrom), the side's softirq milliseconds per MB where
    they were attributed, and
    instructions and cycles per byte where counted. A ratio without its inputs is left out."""
    out: dict[str, float | None] = {}
    for role, dev in underlay.items():
        if SYSCALL_COUNT.key(role=role) in metrics:
            out.update(_side_ratios(metrics, role, dev))
    return {k: v for k, v in out.items() if v is not None}


def _side_ratios(metrics: Mapping[str, float | None], role: str, dev: str) -> dict[str, float | None]:
    """One counted side's ratios over its underlay device `dev` (see `ratios`)."""
    out: dict[str, float | None] = {}
    rx_p, tx_p = (metrics.get(DEV.key(role=role, device=dev, field=f)) for f in ("rx_packets", "tx_packets"))
    nbytes = carried_bytes(metrics, dev, role) or 0.0

    def count(spec: MetricSpec, **values: str) -> float | None:
        return metrics.get(spec.key(role=role, **values))

    def ratio(suffix: str) -> str:
        return RATIO[suffix].key(role=role)

    out[ratio("syscalls_per_mb")] = _div(count(SYSCALL_COUNT), nbytes / MB)
    out[ratio("ctx_switches_per_mb")] = _div(count(CTX_SWITCHES), nbytes / MB)
    for name in ("read", "write"):
        if SYSCALL.key(role=role, syscall=name) in metrics:
            out[ratio(f"{name}_per_mb")] = _div(count(SYSCALL, syscall=name), nbytes / MB)
    out[ratio("bytes_per_wakeup")] = _div(nbytes, count(CTX_KIND, kind="voluntary"))
    sends = _sum(metrics, [SYSCALL.key(role=role, syscall=s) for s in SEND_FAMILY])
    recvs = _sum(metrics, [SYSCALL.key(role=role, syscall=s) for s in RECV_FAMILY])
    out[ratio("packets_per_send")] = _div(tx_p, sends)
    out[ratio("packets_per_recv")] = _div(_received(metrics, role, rx_p), recvs)
    # the side's softirq time (monitor/irqtime.py), where its CPUs are its own
    out[ratio("softirq_ms_per_mb")] = _div(_ms(count(SOFTIRQ_S)), nbytes / MB)
    for hw in HARDWARE_EVENTS:
        if count(EVENT, event=hw) is not None:
            out[ratio(f"{hw}_per_byte")] = _div(count(EVENT, event=hw), nbytes)
    return out


def _paranoid() -> int | None:
    try:
        return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip())
    except (OSError, ValueError):
        return None


def _lockdown(path: Path = Path("/sys/kernel/security/lockdown")) -> str | None:
    """The kernel's lockdown mode, the bracketed word of `none [integrity] confidentiality`; None where the
    kernel has no lockdown."""
    try:
        m = re.search(r"\[(\w+)\]", path.read_text())
    except OSError:
        return None
    return m.group(1) if m else None


DENIED = ("No permissions", "Access to performance monitoring", "Permission denied", "not permitted")


def remedy(output: str, *, paranoid: int | None, lockdown: str | None, tracefs: bool) -> str:
    """What to set so perf can count syscalls here, from why `perf stat` failed (its `output`) and the
    host's settings (pure; `tunbench doctor` prints it)."""
    if not tracefs:
        return "mount tracefs, where the syscall tracepoints are: mount -t tracefs nodev /sys/kernel/tracing"
    if lockdown == "confidentiality":
        return (
            "the kernel is locked down (lockdown=confidentiality forbids perf reading kernel tracepoints): "
            "boot with lockdown=integrity or none"
        )
    if any(d in output for d in DENIED):
        return (
            f"perf may not read the syscall tracepoints (kernel.perf_event_paranoid is {paranoid}): run tunbench "
            "as root with CAP_PERFMON or CAP_SYS_ADMIN (a container: --cap-add PERFMON), or "
            "sysctl kernel.perf_event_paranoid=-1 with the tracepoints readable "
            "(mount -o remount,mode=755 /sys/kernel/tracing)"
        )
    return "perf stat fails here: try `perf stat -e raw_syscalls:sys_enter true` for its whole message"


def probe(perf: str | None) -> Capability:
    """What perf may count on this host, found once per run: `perf stat` on `true` with every candidate
    event; the events it counts are kept, and hardware ones only when supported. `why` says why it counts
    nothing and `fix` what to install or set (doctor prints both)."""
    if perf is None:
        return Capability("", (), "perf is not installed (Debian: apt install linux-perf)", fix="install perf")
    syscalls = present_syscalls()
    candidates = [*BASE_EVENTS, *(syscall_event(s) for s in syscalls), *HARDWARE_EVENTS]
    if _has_tracepoint("sched", "sched_switch"):
        candidates.append(PREEMPTED)
    try:
        res = run_cmd([perf, "stat", "-x,", *event_args(candidates), "true"], timeout_s=20, check=False)
    except (OSError, CommandFailed) as e:
        return Capability(perf, (), f"perf stat failed: {e}", fix=f"check that {perf} runs")
    counts = parse_stat_csv(res.stderr)
    if res.returncode != 0 or "raw_syscalls:sys_enter" not in counts:
        lines = [ln.strip() for ln in res.stderr.strip().splitlines() if ln.strip()]
        said = next((ln for ln in lines if any(d in ln for d in DENIED)), " ".join(lines[-2:]))
        said = re.sub(r"^Error:\s*", "", said)
        fix = remedy(res.stderr, paranoid=_paranoid(), lockdown=_lockdown(), tracefs=_tracefs_mounted())
        return Capability(perf, (), f"perf stat cannot count syscalls here: {said or 'no output'}", fix=fix)
    hardware = all(counts.get(h) is not None for h in HARDWARE_EVENTS)
    events = [e for e in candidates if e not in HARDWARE_EVENTS or hardware]
    return Capability(perf, tuple(events), hardware=hardware)


def _tracefs_mounted(tracefs: Sequence[Path] = TRACEFS) -> bool:
    return any((root / "events").is_dir() for root in tracefs)


def _ack(fd: int, timeout_s: float) -> bool:
    """Read perf's `ack` from the ack FIFO within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    got = b""
    while b"ack" not in got:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return False
        got += os.read(fd, 64)
    return True


class Counting:
    """One role's perf stat over the window: `start()` attaches and enables (acknowledged), `finish()`
    disables, stops perf and returns the role's metrics. Failures say why in `self.why`, never raise."""

    def __init__(
        self, cap: Capability, role: str, pids: Sequence[int], workdir: Path, ledger: Ledger, tag: str = "perf-stat"
    ) -> None:
        """`tag`: the stem of its files in `workdir` (`<tag>-<role>.csv`, its FIFOs and log), so that two
        countings of one role (--count-work and perf/hwinstr.py's instructions) do not share them."""
        self.role, self.pids, self.why = role, list(pids), ""
        self.exited = 0
        self.out = workdir / f"{tag}-{role}.csv"
        ctl, ack = workdir / f"{tag}-{role}.ctl", workdir / f"{tag}-{role}.ack"
        for fifo in (ctl, ack):
            with contextlib.suppress(FileNotFoundError):
                fifo.unlink()
            os.mkfifo(fifo)
        # read-write opens never block and never see EOF when perf closes its end
        self._ctl = os.open(ctl, os.O_RDWR)
        self._ack = os.open(ack, os.O_RDWR)
        self.daemon = Daemon(
            stat_argv(cap.perf, self.pids, cap.events, self.out, ctl, ack),
            ledger=ledger,
            log_path=workdir / f"{tag}-{role}.log",
            what=f"perf stat ({role})",
        )

    def _command(self, word: str) -> bool:
        os.write(self._ctl, f"{word}\n".encode())
        return _ack(self._ack, ACK_TIMEOUT_S)

    def start(self) -> None:
        if not self._command("enable"):
            self.why = f"perf stat ({self.role}) did not start: {self.daemon.log_tail(3) or 'no acknowledgement'}"

    def stop(self) -> str | None:
        """Disable the counters, stop perf and return its CSV (None, `why` saying why, when there is none).
        `exited`: how many of the counted processes had ended by then."""
        self.exited = sum(1 for p in self.pids if not Path(f"/proc/{p}").exists())
        if self.daemon.alive():  # perf ends by itself once every process it counts has exited
            self._command("disable")
            self.daemon.signal(signal.SIGINT)
            self.daemon.wait(10)
        self.daemon.stop()
        for fd in (self._ctl, self._ack):
            os.close(fd)
        if self.why:
            return None
        try:
            return self.out.read_text()
        except OSError as e:
            self.why = f"perf stat ({self.role}) wrote nothing: {e}"
            return None

    def finish(self) -> dict[str, float | None]:
        text = self.stop()
        if text is None:
            return {}
        exited = self.exited
        counts = parse_stat_csv(text)
        m = role_metrics(self.role, counts)
        if m.get(SYSCALL_COUNT.key(role=self.role)) is None:
            self.why = f"perf stat ({self.role}) counted nothing: {self.daemon.log_tail(3)}"
            return {}
        m[PROCESSES.key(role=self.role)] = float(len(self.pids))
        m[EXITED.key(role=self.role)] = float(exited)
        return m


class RoleCount(Protocol):
    """One role's counting over a window, wherever its processes run: `Counting` here, an agent's on a host
    (remote/work.py). `finish()` returns the role's metrics ({} when not counted, `why` saying why)."""

    role: str
    why: str

    def start(self) -> None: ...

    def finish(self) -> dict[str, float | None]: ...


def exit_note(role: str, got: Mapping[str, float | None]) -> str:
    """What a counted role's trial says when processes exited during the window; "" when none did."""
    exited = int(got.get(EXITED.key(role=role)) or 0)
    if not exited:
        return ""
    of = int(got.get(PROCESSES.key(role=role)) or 0)
    return f"{exited} of {of} processes exited during the window (counted up to their exit)"


@contextlib.contextmanager
def count_roles(
    make: Mapping[str, Callable[[], RoleCount]], metrics: dict[str, float | None], notes: dict[str, str]
) -> Iterator[None]:
    """Count each role over the `with` block into `metrics` (`work.<role>.*`): `make[role]()` attaches its
    counting, all are started (enabled) once every one is attached, and finished after the block. `notes[role]`
    says why a role was not counted, or which of its processes exited during the window. Never raises for
    perf's sake: the trial goes on uncounted."""
    runs: list[RoleCount] = []
    try:
        for role, attach in make.items():
            try:
                runs.append(attach())
            except (OSError, TunbenchError) as e:
                notes[role] = f"not counted: perf stat ({role}) could not start: {e}"
        for r in runs:
            if not r.why:
                r.start()
        yield None
    finally:
        for r in runs:
            got = r.finish()
            metrics.update(got)
            if r.why:
                notes[r.role] = f"not counted: {r.why}"
            elif note := exit_note(r.role, got):
                notes[r.role] = note


@contextlib.contextmanager
def counted(
    cap: Capability,
    pids: Mapping[str, Sequence[int]],
    workdir: Path,
    ledger: Ledger,
    metrics: dict[str, float | None],
    notes: dict[str, str],
) -> Iterator[None]:
    """Count each role's processes on this host over the `with` block (count_roles): a role without a
    process, or a host where perf cannot count, is noted "not counted" with the reason."""
    if not cap.available:
        notes.update({role: f"not counted: {cap.why}" for role in pids})
        yield None
        return
    make: dict[str, Callable[[], RoleCount]] = {}
    for role, ps in pids.items():
        if ps:
            make[role] = functools.partial(Counting, cap, role, ps, workdir, ledger)
        else:
            notes[role] = f"not counted: {NO_PROCESS}"
    with count_roles(make, metrics, notes):
        yield None
