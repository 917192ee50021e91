"""Running external programs: one-shot commands that fail loudly, and daemons owned by a context manager.

Every program tunbench starts gets its own process group (start_new_session) and is recorded in the run's
ledger; it is stopped by that process group, never by name.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

import psutil

from tunbench.errors import CommandFailed, DependencyMissing
from tunbench.host.ledger import Ledger, ProcRecord


def rss_of(pids: list[int]) -> list[int]:
    """The resident memory (bytes) of each of `pids` still alive."""
    out = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            out.append(psutil.Process(pid).memory_info().rss)
    return out


def ns_argv(netns: str | None, argv: Sequence[str]) -> list[str]:
    """Prefix argv so it runs inside network namespace `netns` (`ip netns exec` execs, so the pid is kept)."""
    return ["ip", "netns", "exec", netns, *argv] if netns else list(argv)


def joined_argv(cgroup_procs: Path | Sequence[Path] | None, argv: Sequence[str]) -> list[str]:
    """argv started by a shell that first writes its pid into each cgroup.procs file, then execs it: the
    program and every descendant are in those cgroups from their first instruction (accounting, placement)."""
    files = [cgroup_procs] if isinstance(cgroup_procs, Path) else list(cgroup_procs or [])
    if not files:
        return list(argv)
    script = 'n=$0; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 126; shift; n=$((n - 1)); done; exec "$@"'
    return ["sh", "-c", script, str(len(files)), *(str(f) for f in files), *argv]


def run_cmd(
    argv: Sequence[str],
    *,
    netns: str | None = None,
    timeout_s: float = 30.0,
    stdin: str | None = None,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    what: str = "",
    check: bool = True,
    cgroup_procs: Sequence[Path] = (),
) -> subprocess.CompletedProcess[str]:
    """Run a command to completion; raise CommandFailed (with its output) on non-zero exit or timeout.
    `cgroup_procs`: cgroups it joins before exec (joined_argv)."""
    full = joined_argv(cgroup_procs, ns_argv(netns, argv))
    merged_env = {**os.environ, **env} if env else None
    try:
        proc = subprocess.Popen(
            full,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env=merged_env,
            start_new_session=True,
        )
    except FileNotFoundError as e:
        raise DependencyMissing(f"{what + ': ' if what else ''}`{full[0]}` not found ({e})") from e
    try:
        out, err = proc.communicate(stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        out, err = proc.communicate()
        raise CommandFailed(full, None, (out or "") + (err or ""), what=what) from None
    except BaseException:
        _kill_group(proc.pid)
        proc.wait()
        raise
    result = subprocess.CompletedProcess(full, proc.returncode, out, err)
    if check and proc.returncode != 0:
        raise CommandFailed(full, proc.returncode, out + err, what=what)
    return result


def _kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def become_subreaper() -> None:
    """Make orphaned descendants re-parent to us (not to PID 1, which may never reap them), so a
    stopped process group leaves no zombie that keeps the group "alive"."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _reap_group(pgid: int) -> None:
    while True:
        try:
            info = os.waitid(os.P_PGID, pgid, os.WEXITED | os.WNOHANG)
        except ChildProcessError:
            return
        if info is None:
            return


def _group_gone(pgid: int, leader: subprocess.Popen[bytes] | None) -> bool:
    if leader is not None:
        leader.poll()  # reap the leader, or kill(0) keeps seeing its zombie
    _reap_group(pgid)
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return True
    return False


def _wait_group(pgid: int, leader: subprocess.Popen[bytes] | None, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not _group_gone(pgid, leader):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def stop_group(pid: int, *, leader: subprocess.Popen[bytes] | None = None, term_timeout_s: float = 3.0) -> None:
    """SIGTERM the process group led by `pid`, wait, then SIGKILL whatever is left of it."""
    _kill_group(pid, signal.SIGTERM)
    if _wait_group(pid, leader, term_timeout_s):
        return
    _kill_group(pid, signal.SIGKILL)
    _wait_group(pid, leader, 2.0)


class Daemon:
    """A long-running program in a namespace, in its own process group, optionally in a cgroup.

    Output (stdout + stderr) goes to `log_path`. `stop()` (also on context exit) ends the whole process
    group and reaps it; the ledger forgets it only once it is gone.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        ledger: Ledger,
        log_path: Path,
        what: str,
        netns: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        cgroup_procs: Path | Sequence[Path] | None = None,
        stdout_pipe: bool = False,
    ) -> None:
        self.argv = list(argv)
        self.what = what
        self.log_path = log_path
        self._ledger = ledger
        # join the cgroups before exec, so every descendant is accounted (and placed) from its first instruction
        full = joined_argv(cgroup_procs, ns_argv(netns, argv))
        self._log: IO[bytes] = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        try:
            self.proc = subprocess.Popen(
                full,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if stdout_pipe else self._log,
                stderr=self._log,
                env={**os.environ, **env} if env else None,
                cwd=cwd,
                start_new_session=True,
            )
        except FileNotFoundError as e:
            self._log.close()
            raise DependencyMissing(f"{what}: `{full[0]}` not found") from e
        self.record: ProcRecord = ledger.add_proc(self.proc.pid, what)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def returncode(self) -> int | None:
        """The leader's exit status, None while it runs."""
        return self.proc.poll()

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait(self, timeout_s: float) -> bool:
        """Wait for the leader to exit; False if it still runs after `timeout_s`."""
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def signal(self, sig: int) -> None:
        """Send `sig` to the whole process group (e.g. SIGINT, so perf writes its data)."""
        _kill_group(self.proc.pid, sig)

    def stop(self) -> None:
        stop_group(self.proc.pid, leader=self.proc)  # also ends children that outlived the leader
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()
        self._ledger.drop_proc(self.record)

    def __enter__(self) -> Daemon:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def stop_daemons(daemons: Sequence[Daemon], term_timeout_s: float = 3.0) -> None:
    """End many daemons at once: SIGTERM every process group, one shared wait, then each one's usual stop
    (SIGKILL of a group still there, reaping, and the ledger entry dropped)."""
    for d in daemons:
        d.signal(signal.SIGTERM)
    deadline = time.monotonic() + term_timeout_s
    while time.monotonic() < deadline and any(d.proc.poll() is None for d in daemons):
        time.sleep(0.02)
    for d in daemons:
        d.stop()


def run_foreground(
    argv: Sequence[str], *, ledger: Ledger, what: str, netns: str | None = None, env: Mapping[str, str] | None = None
) -> int:
    """Run an interactive command on our terminal (e.g. `tunbench link shell`) and return its exit status.
    While it runs, Ctrl-C is the command's business: we ignore SIGINT and it gets the default handler."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc = subprocess.Popen(
            ns_argv(netns, argv),
            env={**os.environ, **env} if env else None,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        rec = ledger.add_proc(proc.pid, what)
        status = proc.wait()
        ledger.drop_proc(rec)
        return status
    finally:
        signal.signal(signal.SIGINT, old)


def tree_pids(roots: list[int]) -> list[int]:
    out: list[int] = []
    for pid in roots:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            out.append(pid)
            out.extend(c.pid for c in proc.children(recursive=True))
    return out
