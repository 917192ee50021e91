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
    _RUNNING.add(proc.pid)
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
    finally:
        _RUNNING.discard(proc.pid)
    result = subprocess.CompletedProcess(full, proc.returncode, out, err)
    if check and proc.returncode != 0:
        raise CommandFailed(full, proc.returncode, out + err, what=what)
    return result


# the process groups of the commands run_cmd is waiting for (on any thread): kill_running ends them
_RUNNING: set[int] = set()


def kill_running() -> int:
    """End every command a run_cmd on another thread is still waiting for (its whole process group): a
    teardown that must not wait for them (the agent's, at the end of its input). How many there were."""
    pids = list(_RUNNING)
    for pid in pids:
        _kill_group(pid)
    return len(pids)


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


def _wait_groups(pgids: Sequence[int], leaders: dict[int, subprocess.Popen[bytes]], timeout_s: float) -> list[int]:
    """Wait until every group in `pgids` is gone, or `timeout_s`; the groups still there."""
    deadline = time.monotonic() + timeout_s
    left = list(pgids)
    while True:
        left = [g for g in left if not _group_gone(g, leaders.get(g))]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.01)


def stop_groups(
    pids: Sequence[int],
    *,
    leaders: Sequence[subprocess.Popen[bytes]] = (),
    term_timeout_s: float = 3.0,
    kill_timeout_s: float = 2.0,
) -> list[int]:
    """End many process groups at once: SIGTERM every group led by a pid in `pids`, one shared wait of
    `term_timeout_s`, SIGKILL every group still there, one shared wait of `kill_timeout_s`. The time is that
    of the slowest group, not the sum of all (a `tunbench clean` after a killed 100-client run). `leaders`:
    the Popen objects of groups this process started, polled so their zombies do not keep them alive.
    Returns the groups that outlived the SIGKILL wait."""
    by_pid = {p.pid: p for p in leaders}
    for pgid in pids:
        _kill_group(pgid, signal.SIGTERM)
    left = _wait_groups(pids, by_pid, term_timeout_s)
    for pgid in left:
        _kill_group(pgid, signal.SIGKILL)
    return _wait_groups(left, by_pid, kill_timeout_s)


def stop_group(pid: int, *, leader: subprocess.Popen[bytes] | None = None, term_timeout_s: float = 3.0) -> None:
    """SIGTERM the process group led by `pid`, wait, then SIGKILL whatever is left of it."""
    stop_groups([pid], leaders=[leader] if leader is not None else (), term_timeout_s=term_timeout_s)


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
        self._finish()

    def _finish(self) -> None:
        """After its group was stopped: reap the leader, close its pipes and log, forget it in the ledger."""
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
    """End many daemons at once (a fleet's N clients): every process group stopped together (stop_groups:
    one SIGTERM each, one shared wait, one SIGKILL of what is left), then each reaped and dropped from the
    ledger. The time is the slowest daemon's, not the sum."""
    stop_groups([d.pid for d in daemons], leaders=[d.proc for d in daemons], term_timeout_s=term_timeout_s)
    for d in daemons:
        d._finish()


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
