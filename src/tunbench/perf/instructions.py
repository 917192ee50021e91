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
of a process's instructions cannot see it: their roles have no userspace daemon and say so. A role on another
host (``--hosts``) is not counted either.

Each dump is also split by function (valgrind's callgrind_annotate): the instructions of Go's runtime
(``instr.<role>.runtime``: its scheduler, channels, locks' slow paths, allocator and collector) depend on
timing, not on the traffic. Over twelve windows of one fixed UDP load, wireguard-go's count per packet spread
by 2.9-3.7% in all and by 0.3-0.5% outside the runtime (docs/work-gate.md). The gate judges the part outside it;
a program in another language has no such functions, and its whole count is judged.

A stripped Go build (Debian's wireguard-go) has no symbols, and callgrind names its functions by address:
perf/gosyms.py names them from the binary's own pclntab, which stripping keeps.

Go programs need ``GODEBUG=asyncpreemptoff=1`` under valgrind 3.19: Go's preemption signal otherwise trips
an assertion in callgrind. It is set for every wrapped daemon (other programs ignore it).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from tunbench.errors import CommandFailed
from tunbench.host.proc import run_cmd
from tunbench.monitor.counters import INSTR_COUNT, INSTR_RUNTIME, short_ifname
from tunbench.perf import gosyms
from tunbench.results import TrialRecord
from tunbench.sites.base import Pair
from tunbench.tunnels.tunnel import Tunnel
from tunbench.workloads.base import Context

ROLES = ("client", "server")
DEVICE = {"client": "tc", "server": "ts"}
"""The suffix of each role's tunnel device name (the adapters' `dev_client`/`dev_server`)."""
DUMP_PREFIX = "callgrind"
KEEP_DUMPS_ENV = "TUNBENCH_KEEP_DUMPS"
"""A directory: each window's callgrind dump is moved there (named by the trial and role) instead of deleted,
to read with callgrind_annotate later."""
CONTROL_TIMEOUT_S = 20.0
GO_ENV = {"GODEBUG": "asyncpreemptoff=1"}
FIRST_WINDOW = (
    "not counted: the first window of a warm bring-up, the process's own warm-up (it read 5-10% more "
    "instructions per byte than the windows after it: docs/work-gate.md)"
)
_TOTALS = re.compile(r"^(?:totals|summary):\s*(\d+)", re.M)
_FUNCTION = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(?:\S*?:)?(\S+?)(?:'\d+)?(?: \[(.*)\])?$")
_ADDRESS = re.compile(r"^0x[0-9a-f]+$")
GO_RUNTIME = re.compile(
    r"^(runtime[./]|internal/runtime/|runtime/internal/|internal/sync\.|sync\.runtime_|internal/poll\.runtime_|"
    r"gogo$|gosave_|mcall$|morestack)"
)
"""The functions of Go's runtime, as callgrind names them: package runtime, the runtime's internals, the mutex
slow path (spinning and parking, internal/sync since Go 1.24), the runtime hooks sync and poll link to, and the
runtime's assembly entry points (gogo, mcall, morestack), which carry no package name."""


@dataclass(frozen=True)
class Callgrind:
    """valgrind and callgrind_control on this machine (None: missing)."""

    valgrind: str | None
    control: str | None
    annotate: str | None = None

    @property
    def why_not(self) -> str:
        """Why nothing can be counted ("" when valgrind and callgrind_control are both there)."""
        missing = [
            name for name, path in (("valgrind", self.valgrind), ("callgrind_control", self.control)) if not path
        ]
        return f"not counted: {', '.join(missing)} missing (Debian: apt-get install valgrind)" if missing else ""


def find() -> Callgrind:
    return Callgrind(shutil.which("valgrind"), shutil.which("callgrind_control"), shutil.which("callgrind_annotate"))


def dump_stem(workdir: Path, role: str, pid: int | str = "%p") -> Path:
    """Where a role's process dumps: `<trial dir>/callgrind.<role>.out.<pid>`, then `.1`, `.2`... one per
    window. The pid is in the name because valgrind follows the daemon into what it runs (a build given as a
    wrapper script execs the real program; a daemon may start helpers), and each process dumps its own."""
    return workdir / f"{DUMP_PREFIX}.{role}.out.{pid}"


def vgdb_prefix(workdir: Path, role: str) -> Path:
    """The prefix of the FIFOs valgrind's gdbserver and callgrind_control talk through: in the trial's own
    directory (not /tmp, valgrind's default), so a killed run leaves none behind where `tunbench clean` does
    not look."""
    return workdir / f"vgdb.{role}"


def wrap(
    valgrind: str, role: str, argv: list[str], env: dict[str, str], workdir: Path
) -> tuple[list[str], dict[str, str]]:
    """A daemon's command line under callgrind, instrumentation off until a window switches it on."""
    prefix = [
        valgrind,
        "--tool=callgrind",
        "--instr-atstart=no",
        "--trace-children=yes",
        f"--callgrind-out-file={dump_stem(workdir, role)}",
        f"--vgdb-prefix={vgdb_prefix(workdir, role)}",
        "--quiet",
    ]
    return [*prefix, *argv], {**env, **GO_ENV}


def totals(text: str) -> float | None:
    """The instruction count of one callgrind dump (its `totals:` line; `summary:` in older formats)."""
    counts = [int(m) for m in _TOTALS.findall(text)]
    return float(max(counts)) if counts else None


def runtime_count(annotated: str, names: Callable[[str, int], str | None] | None = None) -> float:
    """The instructions in Go's runtime (GO_RUNTIME) of one dump, from callgrind_annotate's per-function
    self costs (`annotated`: its output with --threshold=100, every function listed); 0 for a program
    without one. `names`: (object, address) -> the function's name, for the functions callgrind could name
    by address only (a stripped Go build: perf/gosyms.py)."""
    total = 0
    for line in annotated.splitlines():
        m = _FUNCTION.match(line)
        if not m:
            continue
        name = m.group(2)
        if names is not None and _ADDRESS.match(name):
            name = names(m.group(3) or "", int(name, 16)) or name
        if GO_RUNTIME.match(name):
            total += int(m.group(1).replace(",", ""))
    return float(total)


GO_BUILDINFO = b"\xff Go buildinf:"
"""The magic that opens a Go binary's .go.buildinfo section (its module and toolchain versions), which
stripping keeps."""


def dumped_program(dump: Path) -> str:
    """The program a callgrind dump counted (its `cmd:` line's first word: what the wrapper ran), found on
    PATH when the adapter named it without a directory (`wireguard-go`)."""
    with dump.open(errors="replace") as f:
        for line in f:
            if line.startswith("cmd:"):
                program = [*line.split(), "", ""][1]
                return program if not program or os.path.isabs(program) else shutil.which(program) or program
            if line.startswith(("fn=", "fl=", "ob=")):
                break
    return ""


def go_binary(program: str) -> tuple[bool, gosyms.GoFunctions | None]:
    """Whether `program` is a Go binary, and its functions from its pclntab: read once per build (its path
    and modification time), not once per dump."""
    try:
        st = os.stat(program)
    except OSError:
        return False, None
    return _go_binary(os.path.realpath(program), st.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _go_binary(real: str, mtime_ns: int) -> tuple[bool, gosyms.GoFunctions | None]:
    try:
        go = GO_BUILDINFO in Path(real).read_bytes()
    except OSError:
        return False, None
    return go, gosyms.read(real) if go else None


def other_dumps(workdir: Path, role: str, pid: int) -> set[int]:
    """The pids other than `pid` with a dump of the role's in the trial's directory."""
    prefix = f"{DUMP_PREFIX}.{role}.out."
    return {
        int(head)
        for p in workdir.glob(prefix + "*")
        if (head := p.name.removeprefix(prefix).split(".")[0]).isdigit() and int(head) != pid
    }


def forked(workdir: Path, role: str, pid: int, before: set[int] | frozenset[int] = frozenset()) -> int:
    """How many other processes the role's daemon `pid` ran under valgrind during the window: its live
    children, and the pids with a dump that were not there at the window's start (`before`: a child that
    exited dumped at its exit). A window's count read from `pid` alone would leave their work out. What ran
    before the window (a wrapper script's `dirname`) does not count."""
    try:
        children = {c.pid for c in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        children = set()
    return len(children | (other_dumps(workdir, role, pid) - set(before)))


def newest_dump(workdir: Path, role: str, pid: int) -> Path | None:
    """The most recent numbered dump of the role's process `pid` (`callgrind.<role>.out.<pid>.N`, the largest
    N)."""
    stem = dump_stem(workdir, role, pid)
    numbered = []
    for p in workdir.glob(f"{stem.name}.*"):
        suffix = p.name.removeprefix(stem.name + ".")
        if suffix.isdigit():
            numbered.append((int(suffix), p))
    return max(numbered)[1] if numbered else None


def keep_dump(dump: Path, rec: TrialRecord, role: str, keep: str | None = None) -> Path | None:
    """Delete a read dump, or move it into the directory KEEP_DUMPS_ENV names (created if need be) as
    `<trial seq>-<label>-r<repetition>.<role>.<n>.callgrind` (n: the dump's own number, the window of the
    bring-up); where it went (None: deleted)."""
    keep = os.environ.get(KEEP_DUMPS_ENV) if keep is None else keep
    if not keep:
        dump.unlink(missing_ok=True)
        return None
    target = Path(keep) / f"{rec.seq:03d}-{rec.label}-r{rec.repetition}.{role}.{dump.suffix.lstrip('.')}.callgrind"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(dump, target)
    return target


def keep_logs(workdir: Path, rec: TrialRecord, keep: str | None = None) -> list[Path]:
    """Copy the daemons' logs as they stand at the window's end (`<name>.log` in the trial's directory) next
    to the dumps kept (KEEP_DUMPS_ENV), as `<trial seq>-<label>-r<repetition>.<name>.log`; nothing without
    that directory."""
    keep = os.environ.get(KEEP_DUMPS_ENV) if keep is None else keep
    if not keep:
        return []
    Path(keep).mkdir(parents=True, exist_ok=True)
    kept = []
    for log in sorted(workdir.glob("*.log")):
        target = Path(keep) / f"{rec.seq:03d}-{rec.label}-r{rec.repetition}.{log.name}"
        shutil.copyfile(log, target)
        kept.append(target)
    return kept


class CountInstructions:
    """A runner WindowHook, and the daemon wrapper it needs (`wrap_daemon`, passed to the tunnel through the
    trial's Setup): each local role's tunnel daemon runs under callgrind; around each measured call its
    instrumentation is switched on, then off, and the counts dumped and read."""

    def __init__(self, tools: Callgrind | None = None) -> None:
        self.tools = tools if tools is not None else find()

    def wrap_daemon(
        self, role: str, argv: list[str], env: dict[str, str], workdir: Path
    ) -> tuple[list[str], dict[str, str]]:
        if self.tools.valgrind is None or self.tools.control is None:
            return argv, env
        return wrap(self.tools.valgrind, role, argv, env, workdir)

    @contextlib.contextmanager
    def __call__(self, ctx: Context, tunnel: Tunnel, rec: TrialRecord, pair: Pair) -> Iterator[object]:
        if ctx.baseline:  # the direct baseline has no tunnel to count: nothing to say either
            yield None
            return
        notes: dict[str, str] = {}
        places = {"client": ctx.client, "server": ctx.server}
        pids: dict[str, int] = {}
        first_warm = (rec.params.get("warm") or {}).get("window") == 1
        for role in ROLES:
            daemon = tunnel.daemons.get(role)
            if first_warm:
                notes[role] = FIRST_WINDOW
            elif self.tools.why_not:
                notes[role] = self.tools.why_not
            elif places[role].machine:  # not this machine, where the wrapper ran its daemon
                notes[role] = "not counted: the role runs on another host (--hosts)"
            elif daemon is None:
                notes[role] = "not counted: no userspace daemon (a kernel tunnel's work is in the kernel)"
            else:
                pids[role] = daemon.pid
        started: dict[str, int] = {}
        before = {role: other_dumps(tunnel.workdir, role, pid) for role, pid in pids.items()}
        try:
            for role, pid in pids.items():
                if why := self._control(tunnel.workdir, role, ["-i", "on", str(pid)]):
                    notes[role] = f"not counted: instrumentation could not be switched on ({why})"
                else:
                    started[role] = pid
            yield None
        finally:
            for role, pid in started.items():
                if forks := forked(tunnel.workdir, role, pid, before[role]):
                    notes[role] = (
                        f"not counted: the daemon ran {forks} process(es) of its own during the window (a "
                        "process per connection, as socat forks): only its first process's count can be read"
                    )
                    self._control(tunnel.workdir, role, ["-i", "off", str(pid)])
                    continue
                why = self._control(tunnel.workdir, role, ["-i", "off", str(pid)]) or self._control(
                    tunnel.workdir, role, ["-d", str(pid)]
                )
                dump = newest_dump(tunnel.workdir, role, pid) if not why else None
                count = totals(dump.read_text(errors="replace")) if dump is not None else None
                if dump is None or count is None:
                    notes[role] = f"not counted: {why or 'no callgrind dump was written'}"
                    continue
                rec.metrics[INSTR_COUNT.key(role=role)] = count
                in_runtime, whole = self._runtime(dump)
                if in_runtime is not None:
                    rec.metrics[INSTR_RUNTIME.key(role=role)] = in_runtime
                if whole:
                    rec.params.setdefault("instr_whole", {})[role] = whole
                keep_dump(dump, rec, role)  # the count is stored; the dump can be large
            if started:
                keep_logs(tunnel.workdir, rec)
            if notes:
                rec.params["instr"] = notes
            if started:  # each side's tunnel device, whose packets the count is divided by (pair.py)
                topo = tunnel.topo
                rec.params["instr_devices"] = {
                    role: short_ifname(topo.ifname(DEVICE[role]), topo.prefix) for role in started
                }

    def _runtime(self, dump: Path) -> tuple[float | None, str]:
        """The instructions in Go's runtime of a dump, and why the whole count is judged instead ("" when it
        is not): callgrind_annotate missing or failed, or a Go program without symbols (a stripped build,
        as Debian's wireguard-go: callgrind then names its functions by address only)."""
        if self.tools.annotate is None:
            return None, "Go's runtime not separated: callgrind_annotate is missing"
        try:
            res = run_cmd([self.tools.annotate, "--threshold=100", str(dump)], timeout_s=CONTROL_TIMEOUT_S)
        except CommandFailed as e:
            return None, f"Go's runtime not separated: {str(e).splitlines()[0]}"
        program = dumped_program(dump)
        go, functions = go_binary(program) if program else (False, None)
        real = os.path.realpath(program) if program else ""

        def name(obj: str, pc: int) -> str | None:
            return functions.name(pc) if functions is not None and os.path.realpath(obj) == real else None

        count = runtime_count(res.stdout, name)
        if count == 0 and go:
            return None, f"Go's runtime not separated: {program} has no symbols (stripped): the whole count is judged"
        return count, ""

    def _control(self, workdir: Path, role: str, args: list[str]) -> str:
        """Run callgrind_control on a role's daemon; "" when it said OK, else why not."""
        assert self.tools.control is not None
        argv = [self.tools.control, f"--vgdb-prefix={vgdb_prefix(workdir, role)}", *args]
        try:
            res = run_cmd(argv, timeout_s=CONTROL_TIMEOUT_S, what="callgrind_control")
        except CommandFailed as e:
            return str(e).splitlines()[0]
        return "" if "OK" in res.stdout else (res.stdout.strip().splitlines() or ["no answer"])[-1]
