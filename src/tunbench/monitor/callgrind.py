"""valgrind's callgrind, counting one tunnel daemon's instructions over a window: the daemon's command line
wrapped (instrumentation off until switched on), `callgrind_control` switching it on and off and dumping, the
dump's totals, and its split by function (`callgrind_annotate`) into Go's runtime and the rest, with a stripped
Go build's functions named from its pclntab (monitor/gosyms.py). Everything here runs on the machine where the
daemon runs: a local run's hook (perf/instructions.py) and a host's agent (`--hosts`, remote/agent.py) use the
same `RoleWindow`. Why it is counted this way: perf/instructions.py and docs/work-gate.md.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol

import psutil

from tunbench.errors import CommandFailed
from tunbench.host.proc import run_cmd
from tunbench.monitor import gosyms

DUMP_PREFIX = "callgrind"
KEEP_DUMPS_ENV = "TUNBENCH_KEEP_DUMPS"
"""A directory: each window's callgrind dump is moved there (named by the trial, role and process) instead of
deleted, to read with callgrind_annotate later."""
CONTROL_TIMEOUT_S = 20.0
GO_ENV = {"GODEBUG": "asyncpreemptoff=1"}
_TOTALS = re.compile(r"^(?:totals|summary):\s*(\d+)", re.M)
_FUNCTION = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(?:\S*?:)?(\S+?)(?:'\d+)?(?: \[(.*)\])?$")
_ADDRESS = re.compile(r"^0x[0-9a-f]+$")
GO_RUNTIME = re.compile(
    r"^(runtime[./]|internal/runtime/|runtime/internal/|internal/sync\.|sync\.runtime_|internal/poll\.runtime_|"
    r"sync\.\(\*(Mutex\)\.(lock|unlock)Slow|RWMutex\)\.rUnlockSlow)$|"
    r"sync\.\(\*Pool\)\.(getSlow|pin|pinSlow)$|sync\.\(\*pool(Chain|Dequeue)\)\.|sync\.(poolCleanup|indexLocal)$|"
    r"gogo$|gosave_|mcall$|morestack)"
)
"""The functions of Go's runtime, as callgrind names them: package runtime, the runtime's internals, the mutex
slow path (spinning and parking: internal/sync since Go 1.24, sync's own `lockSlow` before), the runtime hooks
sync and poll link to, sync.Pool's per-P machinery (which of a P's private slot, its shared queue, another P's
queue or the victim cache a Get finds is chosen by which P each goroutine ran on, so by the scheduler; the
per-P lookup every Get and Put makes, `pin` and `indexLocal`, goes with it at a fixed cost per call; Get and
Put themselves stay counted), and the runtime's assembly entry points (gogo, mcall, morestack), which carry no
package name. Measured: docs/work-gate.md, "What moves a count"."""


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


def functions(annotated: str) -> Iterator[tuple[int, str, str]]:
    """callgrind_annotate's per-function self costs (`annotated`: its output with --threshold=100, every
    function listed): (instructions, function, object file or "") per line."""
    for line in annotated.splitlines():
        if m := _FUNCTION.match(line):
            yield int(m.group(1).replace(",", "")), m.group(2), m.group(3) or ""


def function_name(name: str, obj: str, names: Callable[[str, int], str | None] | None = None) -> str:
    """A function's name as callgrind gave it, or, where callgrind could name it by address only (a stripped Go
    build), the name `names` gives: (object, address) -> the name (`address_names`)."""
    if names is not None and _ADDRESS.match(name):
        return names(obj, int(name, 16)) or name
    return name


def runtime_count(annotated: str, names: Callable[[str, int], str | None] | None = None) -> float:
    """The instructions in Go's runtime (GO_RUNTIME) of one dump (`functions`); 0 for a program without one.
    `names`: as for `function_name`."""
    return float(sum(n for n, name, obj in functions(annotated) if GO_RUNTIME.match(function_name(name, obj, names))))


def object_counts(annotated: str) -> dict[str, float]:
    """The instructions of one dump by shared object (its file name: `libssl.so.3`; `functions`); a function
    callgrind named no object for is left out. What the work gate reads a daemon's mode from
    (perf/instructions.py, an adapter's `[instructions]`)."""
    by: dict[str, float] = {}
    for n, _, obj in functions(annotated):
        if obj:
            name = os.path.basename(obj)
            by[name] = by.get(name, 0.0) + n
    return by


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


def role_dumps(workdir: Path, role: str) -> set[Path]:
    """Every dump of the role's processes in the trial's directory (each process's numbered window dumps and
    the dump it wrote at its exit)."""
    return set(workdir.glob(f"{DUMP_PREFIX}.{role}.out.*"))


def process_tree(pid: int) -> list[int]:
    """The daemon `pid` and its live descendants: under ``--trace-children=yes`` each runs under callgrind
    with a gdbserver of its own (socat's process per connection, a wrapper script's real program)."""
    try:
        return [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
    except psutil.Error:
        return [pid]


def window_dumps(workdir: Path, role: str, before: set[Path]) -> list[Path]:
    """The role's dumps written since the window's start (`before`: those there then): each live process's
    dump at the window's end, and the exit dump of each process that ended inside it (a connection's process
    that closed). A process counts only while its instrumentation is on, so a dump holds the window's part
    of that process's work; an empty file is a dump still being written or a process that never dumped."""
    return sorted(p for p in role_dumps(workdir, role) - before if p.stat().st_size > 0)


def keep_dump(dump: Path, name: str, role: str, keep: str | None = None) -> Path | None:
    """Delete a read dump, or move it into the directory KEEP_DUMPS_ENV names (created if need be) as
    `<name>.<role>.<pid>.<n>.callgrind` (`name`: the trial's, `<trial seq>-<label>-r<repetition>`; the pid and
    the dump's own number, the process and the window of its bring-up); where it went (None: deleted)."""
    keep = os.environ.get(KEEP_DUMPS_ENV) if keep is None else keep
    if not keep or not name:
        dump.unlink(missing_ok=True)
        return None
    which = dump.name.removeprefix(f"{DUMP_PREFIX}.{role}.out.")
    target = Path(keep) / f"{name}.{role}.{which}.callgrind"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(dump, target)
    return target


def keep_logs(workdir: Path, name: str, keep: str | None = None) -> list[Path]:
    """Copy the daemons' logs as they stand at the window's end (`<name>.log` in the trial's directory) next
    to the dumps kept (KEEP_DUMPS_ENV), as `<name>.<log name>`; nothing without that directory."""
    keep = os.environ.get(KEEP_DUMPS_ENV) if keep is None else keep
    if not keep:
        return []
    Path(keep).mkdir(parents=True, exist_ok=True)
    kept = []
    for log in sorted(workdir.glob("*.log")):
        target = Path(keep) / f"{name}.{log.name}"
        shutil.copyfile(log, target)
        kept.append(target)
    return kept


def control(tools: Callgrind, workdir: Path, role: str, args: list[str]) -> str:
    """Run callgrind_control on a role's daemon; "" when it said OK, else why not."""
    assert tools.control is not None
    argv = [tools.control, f"--vgdb-prefix={vgdb_prefix(workdir, role)}", *args]
    try:
        res = run_cmd(argv, timeout_s=CONTROL_TIMEOUT_S, what="callgrind_control")
    except CommandFailed as e:
        return str(e).splitlines()[0]
    return "" if "OK" in res.stdout else (res.stdout.strip().splitlines() or ["no answer"])[-1]


class Split(NamedTuple):
    """One dump split by function: the instructions in Go's runtime (None: not separated, `whole` says why the
    whole count is judged instead) and the instructions by shared object (object_counts; None where
    callgrind_annotate could not run: not read, which is not "none in any object")."""

    runtime: float | None
    whole: str
    objects: dict[str, float] | None


def address_names(program: str) -> tuple[bool, Callable[[str, int], str | None]]:
    """Whether a dump's program (`dumped_program`) is a Go binary, and (object, address) -> the name of the
    function at that address in it, from its pclntab (None: another object, or no table read)."""
    go, table = go_binary(program) if program else (False, None)
    real = os.path.realpath(program) if program else ""

    def name(obj: str, pc: int) -> str | None:
        return table.name(pc) if table is not None and os.path.realpath(obj) == real else None

    return go, name


def runtime(tools: Callgrind, dump: Path) -> Split:
    """A dump's split (Split): why the whole count is judged is callgrind_annotate missing or failed, or a Go
    program without symbols whose pclntab could not be read either."""
    if tools.annotate is None:
        return Split(None, "Go's runtime not separated: callgrind_annotate is missing", None)
    try:
        res = run_cmd([tools.annotate, "--threshold=100", str(dump)], timeout_s=CONTROL_TIMEOUT_S)
    except CommandFailed as e:
        return Split(None, f"Go's runtime not separated: {str(e).splitlines()[0]}", None)
    program = dumped_program(dump)
    go, name = address_names(program)
    count = runtime_count(res.stdout, name)
    objects = object_counts(res.stdout)
    if count == 0 and go:
        why = f"Go's runtime not separated: {program} has no symbols (stripped): the whole count is judged"
        return Split(None, why, objects)
    return Split(count, "", objects)


@dataclass(frozen=True)
class Counted:
    """One role's window: its count (None: not counted, `why` says why), the part in Go's runtime (None: not
    separated, `whole` says why the whole count is judged)."""

    count: float | None = None
    runtime: float | None = None
    whole: str = ""
    why: str = ""
    device_bytes: dict[str, float] = field(default_factory=dict)  # the tunnel device's, where its host read them
    processes: int = 1  # the processes whose dumps were added up (socat: the listener and one per connection)
    # the instructions by shared object (object_counts); None where they were not read (perf, callgrind_annotate
    # missing or failed)
    objects: dict[str, float] | None = None


class InstrWindow(Protocol):
    """A role counted elsewhere (its host's agent), switched on when made: `read()` at the window's end."""

    def read(self) -> Counted: ...


Control = Callable[[Path, str, list[str]], str]
Runtime = Callable[[Path], Split]


class RoleWindow:
    """One role's daemon `pid` (started under `wrap`) counted over one window: `on()` switches its
    instrumentation on; `read()` switches it off, dumps, reads the count and splits it, and removes the dump.
    `control` and `runtime` default to this module's, with `tools`."""

    def __init__(
        self,
        tools: Callgrind,
        workdir: Path,
        role: str,
        pid: int,
        *,
        control_fn: Control | None = None,
        runtime_fn: Runtime | None = None,
        keep_as: str = "",
    ) -> None:
        self.workdir, self.role, self.pid = workdir, role, pid
        self.keep_as = keep_as  # the trial's name for its dumps where KEEP_DUMPS_ENV keeps them (keep_dump)
        self._control = control_fn or functools.partial(control, tools)
        self._runtime = runtime_fn or functools.partial(runtime, tools)
        self._before: set[Path] = set()

    def on(self) -> str:
        """Switch the instrumentation of the daemon and of each live process it started on: "" or why not."""
        self._before = role_dumps(self.workdir, self.role)
        if why := self._switch(process_tree(self.pid), ["-i", "on"]):
            return f"not counted: instrumentation could not be switched on ({why})"
        return ""

    def read(self) -> Counted:
        """Off, dumped and read (the daemon keeps running): the window's count, or why there is none. A daemon
        that forks per connection (socat) is counted process by process: each live process is switched off and
        dumped, a process born inside the window started with its parent's switch on, and one that ended inside
        it left its dump at its exit; the window's count is the sum of the dumps written since `on()`."""
        tree = process_tree(self.pid)
        why = self._switch(tree, ["-i", "off"]) or self._switch(tree, ["-d"])
        dumps = window_dumps(self.workdir, self.role, self._before) if not why else []
        counts = [totals(d.read_text(errors="replace")) for d in dumps]
        if not dumps or None in counts:
            return Counted(why=f"not counted: {why or 'no callgrind dump was written'}")
        split = [self._runtime(d) for d in dumps]
        in_runtime = None if any(s.runtime is None for s in split) else sum(s.runtime or 0.0 for s in split)
        whole = next((s.whole for s in split if s.whole), "")
        objects: dict[str, float] | None = {}  # None when a dump's were not read: part of them would understate
        for s in split:  # a mode's share (perf/instructions.py mode_why)
            if s.objects is None or objects is None:
                objects = None
                continue
            for obj, n in s.objects.items():
                objects[obj] = objects.get(obj, 0.0) + n
        for d in dumps:  # the count is kept; a dump can be large (deleted, unless KEEP_DUMPS_ENV keeps it)
            keep_dump(d, self.keep_as, self.role)
        total = sum(c for c in counts if c is not None)
        return Counted(total, in_runtime, whole, processes=len(dumps), objects=objects)

    def _switch(self, pids: list[int], args: list[str]) -> str:
        """callgrind_control `args` on each of the role's processes (the daemon first); "" when each said OK,
        else why not. A process that ended since it was listed is not a failure: its exit dump holds its part."""
        for pid in pids:
            why = self._control(self.workdir, self.role, [*args, str(pid)])
            if why and (pid == self.pid or psutil.pid_exists(pid)):
                return why if pid == self.pid else f"process {pid}: {why}"
        return ""
