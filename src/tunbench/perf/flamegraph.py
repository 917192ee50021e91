"""Flamegraphs of the tunnel under load (`tunbench run --flamegraph`): a runner WindowHook that runs
`perf record -e cpu-clock -g` on each role's tunnel processes during the measured window (software clock:
these hosts have no hardware counters), then `perf script | inferno-collapse-perf | inferno-flamegraph`
to an SVG stored as the trial's artifact `flamegraph.<role>.svg` (and written to a directory).

perf runs in the root namespace (it follows pids, not network namespaces), in its own process group,
and is stopped by pid with SIGINT so it writes its data. User-space and kernel frames both; frames of a
stripped Go binary are named from its .gopclntab (perf/gosym.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from tunbench.errors import CommandFailed, DependencyMissing, TrialError
from tunbench.host.proc import Daemon, run_cmd
from tunbench.metrics import declare
from tunbench.perf import gosym
from tunbench.results import TrialRecord
from tunbench.sites.base import Pair
from tunbench.tunnels.tunnel import Tunnel
from tunbench.workloads.base import Context

SAMPLED_CPU = declare(
    "flamegraph.{role}.sampled_cpu_s", "s", "none", "info", "The CPU seconds perf's samples of a side add up to."
)

log = logging.getLogger(__name__)

FREQ_HZ = 999
_UNKNOWN = re.compile(r"^(\s+)([0-9a-f]+) \[unknown\] \((/[^)]+)\)$", re.M)
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def find_tool(name: str) -> str | None:
    """On PATH, or where `cargo install` puts it (~/.cargo/bin, often not on root's PATH)."""
    found = shutil.which(name)
    if found:
        return found
    cargo = Path.home() / ".cargo" / "bin" / name
    return str(cargo) if cargo.is_file() and os.access(cargo, os.X_OK) else None


def check_tools() -> dict[str, str]:
    tools = {n: find_tool(n) for n in ("perf", "inferno-collapse-perf", "inferno-flamegraph")}
    missing = [n for n, p in tools.items() if p is None]
    if missing:
        raise DependencyMissing(
            f"--flamegraph needs {', '.join(missing)} (`make tools deps`: Debian linux-perf, `cargo install inferno`)"
        )
    return {n: p for n, p in tools.items() if p is not None}


def record_argv(perf: str, pids: list[int], out: Path) -> list[str]:
    pid_list = ",".join(str(p) for p in pids)
    return [perf, "record", "-e", "cpu-clock", "-F", str(FREQ_HZ), "-g", "-p", pid_list, "-o", str(out)]


def name_go_frames(script: str, cache: dict[str, gosym.GoSymbols | None] | None = None) -> str:
    """perf script text with `[unknown]` frames of stripped Go executables named (pure but for reading
    the binaries)."""
    cache = {} if cache is None else cache

    def sub(m: re.Match[str]) -> str:
        dso = m.group(3)
        if dso not in cache:
            cache[dso] = gosym.load(Path(dso))
        syms = cache[dso]
        name = syms.lookup_perf(int(m.group(2), 16)) if syms else None
        return f"{m.group(1)}{m.group(2)} {name} ({dso})" if name else m.group(0)

    return _UNKNOWN.sub(sub, script)


def artifact_name(uid: str, seq: int, label: str, role: str) -> str:
    return f"{uid}-t{seq:03d}-{_SAFE.sub('_', label)}-{role}.svg"


class _Recording:
    def __init__(self, perf: str, role: str, pids: list[int], ctx: Context) -> None:
        self.role = role
        self.data = ctx.workdir / f"perf-{role}.data"
        self.daemon = Daemon(
            record_argv(perf, pids, self.data),
            ledger=ctx.ledger,
            log_path=ctx.workdir / f"perf-{role}.log",
            what=f"perf record ({role})",
        )

    def wait_started(self, timeout_s: float = 5.0) -> None:
        """perf creates its output file once it has attached to the processes."""
        deadline = time.monotonic() + timeout_s
        while not (self.data.exists() and self.data.stat().st_size > 0):
            if not self.daemon.alive():
                raise TrialError(f"perf record ({self.role}) exited: {self.daemon.log_tail(5)}")
            if time.monotonic() > deadline:
                raise TrialError(f"perf record ({self.role}) did not start within {timeout_s:g} s")
            time.sleep(0.01)

    def stop(self) -> None:
        """SIGINT (perf then writes its data and exits), then the usual group stop for anything left."""
        self.daemon.signal(signal.SIGINT)
        self.daemon.wait(20)
        self.daemon.stop()


class Flamegraphs:
    """A runner WindowHook (see runner.py): one perf recording per role that has tunnel processes."""

    def __init__(self, run_uid: str, out_dir: Path | None) -> None:
        self.tools = check_tools()
        self.run_uid = run_uid
        self.out_dir = out_dir

    def __call__(
        self, ctx: Context, tunnel: Tunnel, rec: TrialRecord, pair: Pair
    ) -> contextlib.AbstractContextManager[object]:
        return self._window(ctx, tunnel, rec)

    @contextlib.contextmanager
    def _window(self, ctx: Context, tunnel: Tunnel, rec: TrialRecord) -> Iterator[object]:
        recs: list[_Recording] = []
        try:
            for role in ("client", "server"):
                pids = tunnel.pids(role)
                if pids:
                    recs.append(_Recording(self.tools["perf"], role, pids, ctx))
            for r in recs:
                r.wait_started()
            yield None
        finally:
            for r in recs:
                r.stop()
        for r in recs:
            self._render(r, ctx, rec)

    def _render(self, r: _Recording, ctx: Context, rec: TrialRecord) -> None:
        try:
            script = run_cmd(
                [self.tools["perf"], "script", "-i", str(r.data)], timeout_s=120, what=f"perf script ({r.role})"
            ).stdout
            folded = run_cmd(
                [self.tools["inferno-collapse-perf"]],
                stdin=name_go_frames(script),
                timeout_s=120,
                what="inferno-collapse-perf",
            ).stdout
            if not folded.strip():
                rec.metrics[SAMPLED_CPU.key(role=r.role)] = 0.0
                return
            title = f"{rec.label} {r.role} · {rec.profile} · {rec.workload} · trial {rec.seq}"
            svg = run_cmd(
                [self.tools["inferno-flamegraph"], "--title", title],
                stdin=folded,
                timeout_s=120,
                what="inferno-flamegraph",
            ).stdout
        except (CommandFailed, UnicodeDecodeError) as e:
            raise TrialError(f"flamegraph ({r.role}): {e}") from e
        # inferno weighs each cpu-clock sample by its period (ns): the total is the CPU time sampled
        rec.metrics[SAMPLED_CPU.key(role=r.role)] = 1e-9 * sum(
            int(line.rsplit(" ", 1)[1]) for line in folded.splitlines() if " " in line
        )
        rec.artifacts[f"flamegraph.{r.role}.svg"] = svg.encode()
        rec.artifacts[f"flamegraph.{r.role}.folded"] = folded.encode()
        if self.out_dir is not None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            (self.out_dir / artifact_name(self.run_uid, rec.seq, rec.label, r.role)).write_text(svg)
