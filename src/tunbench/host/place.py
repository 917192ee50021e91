"""Where a role's processes run: a `Place`. Adapters, workloads and the runner ask a place to run a command,
start a daemon, answer a probe or write the trial's files; they never name a namespace or a host.

`LocalPlace` is a namespace on this machine (or this machine's own namespace): it is the host/ owners
(Daemon, run_cmd, RoleCgroup, the ledger) bound to one namespace and one trial directory. A remote place
(tunbench.remote.place) sends the same calls over SSH to `tunbench agent`, which answers them with a
LocalPlace of its own, so both ends run the same code.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tunbench.host.cgroup import RoleCgroup
from tunbench.host.ledger import Ledger
from tunbench.host.proc import Daemon, rss_of, run_cmd, stop_daemons, tree_pids

TCP_LISTEN = "0A"
Completed = subprocess.CompletedProcess[str]


def completed(argv: Sequence[str], returncode: int, stdout: str, stderr: str) -> Completed:
    """A finished command's result, as run_cmd returns it (for a command another host ran)."""
    return subprocess.CompletedProcess(list(argv), returncode, stdout, stderr)


class Proc(Protocol):
    """A daemon a place started: its process group ends with stop()."""

    what: str

    @property
    def pid(self) -> int: ...

    def alive(self) -> bool: ...

    def returncode(self) -> int | None: ...

    def log_tail(self, lines: int = 20) -> str: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class Spawn:
    """A daemon to start at a place, rendered (what Place.spawn takes): one of a batch started in one request
    (a client host's clients: RemotePlace.spawn_many)."""

    place: Place
    argv: Sequence[str]
    what: str
    log_name: str
    env: Mapping[str, str]
    role: str


@dataclass(frozen=True)
class Started:
    """A spawn of a batch: its daemon (None: it failed to start, `error`), and when it was started (or
    tried), on this machine's monotonic clock."""

    proc: Proc | None
    at: float
    error: str | None = None


class Place(Protocol):
    """One role's machine and namespace, and the trial directory there (`{tmp}` for its commands)."""

    label: str  # for messages: "namespace tb1a2b3c-t3s", "host h2"
    workdir: Path
    machine: str  # which machine its processes run on ("" this one): places on one machine stop together

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        timeout_s: float = 30.0,
        check: bool = True,
        what: str = "",
        env: Mapping[str, str] | None = None,
    ) -> Completed: ...

    def spawn(
        self, argv: Sequence[str], *, what: str, log_name: str, env: Mapping[str, str] | None = None, role: str = ""
    ) -> Proc: ...

    def port_open(self, port: int, proto: str = "tcp") -> bool: ...

    def listening(self, proto: str = "tcp") -> set[int]:
        """The ports listening (TCP) or bound (UDP) here: one read for many ports."""
        ...

    def exists(self, path: str) -> bool: ...

    def put_files(self, files: Mapping[str, tuple[bytes, int]]) -> None: ...

    def read(self, rel: str) -> bytes | None:
        """A file of the place's trial directory (e.g. a tool's JSON output), None if it is not there."""
        ...

    def pids(self, role: str, procs: Sequence[Proc]) -> list[int]: ...

    def rss(self, role: str, procs: Sequence[Proc]) -> list[int]:
        """The resident memory of each of the role's processes here (bytes)."""
        ...

    def wait_exits(self, procs: Sequence[Proc], timeout_s: float) -> list[float | None]:
        """Wait until every one of `procs` (daemons started here) has exited, at most `timeout_s`; each one's
        exit time on this machine's time.monotonic() clock, None for one still running."""
        ...

    def stop(self, procs: Sequence[Proc]) -> None:
        """End many daemons started on this place's machine (here or at other places of it) at once: one
        SIGTERM each, one shared wait, one SIGKILL of the rest; the time of the slowest, not the sum of
        their grace periods."""
        ...


EXIT_POLL_S = 0.02


def wait_exits(procs: Sequence[Daemon], timeout_s: float) -> list[float | None]:
    """Poll local daemons every 20 ms until all have exited or `timeout_s` has passed: their exit times."""
    deadline = time.monotonic() + timeout_s
    ended: list[float | None] = [None] * len(procs)
    while True:
        for k, d in enumerate(procs):
            if ended[k] is None and d.proc.poll() is not None:
                ended[k] = time.monotonic()
        if all(e is not None for e in ended) or time.monotonic() >= deadline:
            return ended
        time.sleep(EXIT_POLL_S)


def ns_command(argv: Sequence[str], netns: str | None) -> tuple[list[str], str | None]:
    """`ip ...` inside a namespace runs as `ip -n NS ...` (no `ip netns exec` mount set-up: several times
    cheaper, which matters x500); anything else keeps running through `ip netns exec`."""
    argv = list(argv)
    if netns and argv and argv[0] == "ip" and len(argv) > 1 and argv[1] not in ("netns", "-n", "-netns"):
        return ["ip", "-n", netns, *argv[1:]], None
    return argv, netns


def parse_proc_net(text: str, state: str | None) -> set[int]:
    """Local ports in /proc/net/{tcp,tcp6,udp,udp6} text, optionally only sockets in `state` (hex)."""
    ports: set[int] = set()
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 4 or ":" not in fields[1]:
            continue
        if state is not None and fields[3] != state:
            continue
        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def listening_ports(text: str, proto: str) -> set[int]:
    """Ports listening (TCP) or bound (UDP) in the concatenated /proc/net/{proto} and {proto}6 files (each
    begins with its own header line)."""
    state = TCP_LISTEN if proto == "tcp" else None
    ports: set[int] = set()
    for chunk in re.split(r"(?m)^(?=\s*sl\s)", text):
        ports |= parse_proc_net(chunk, state)
    return ports


class LocalPlace:
    """A namespace of this machine (None: the namespace this process runs in) and a trial directory."""

    def __init__(
        self,
        netns: str | None,
        ledger: Ledger,
        workdir: Path,
        cgroups: Mapping[str, RoleCgroup] | None = None,
        placement: Sequence[Path] = (),
    ) -> None:
        """`placement`: cgroup.procs files every program started here joins when it is not a role's own
        (RoleCgroup.placement_files: the side's CPUs without the tunnel's accounting)."""
        self.netns = netns
        self.ledger = ledger
        self.workdir = workdir
        self.machine = ""
        self.cgroups = dict(cgroups or {})
        self.placement = list(placement)
        self.label = f"namespace {netns}" if netns else "this host"

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        timeout_s: float = 30.0,
        check: bool = True,
        what: str = "",
        env: Mapping[str, str] | None = None,
    ) -> Completed:
        full, ns = ns_command(argv, self.netns)
        return run_cmd(
            full,
            netns=ns,
            stdin=stdin,
            timeout_s=timeout_s,
            check=check,
            what=what,
            env=env,
            cwd=self.workdir,
            cgroup_procs=self.placement,
        )

    def spawn(
        self, argv: Sequence[str], *, what: str, log_name: str, env: Mapping[str, str] | None = None, role: str = ""
    ) -> Daemon:
        cg = self.cgroups.get(role)
        return Daemon(
            argv,
            ledger=self.ledger,
            log_path=self.workdir / log_name,
            what=what,
            netns=self.netns,
            env=env,
            cwd=self.workdir,
            cgroup_procs=cg.procs_files if cg is not None and cg.procs_files else self.placement,
        )

    def port_open(self, port: int, proto: str = "tcp") -> bool:
        return port in self.listening(proto)

    def listening(self, proto: str = "tcp") -> set[int]:
        res = self.run(["cat", f"/proc/net/{proto}", f"/proc/net/{proto}6"], check=False, timeout_s=5)
        return listening_ports(res.stdout, proto)

    def exists(self, path: str) -> bool:
        return Path(path).exists()

    def put_files(self, files: Mapping[str, tuple[bytes, int]]) -> None:
        for rel, (data, mode) in files.items():
            path = self.workdir / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            with os.fdopen(fd, "wb") as out:
                out.write(data)

    def read(self, rel: str) -> bytes | None:
        try:
            return (self.workdir / rel).read_bytes()
        except OSError:
            return None

    def pids(self, role: str, procs: Sequence[Proc]) -> list[int]:
        """Every process of a role: its cgroup's members, or else the daemons' process trees."""
        cg = self.cgroups.get(role)
        if cg is not None and cg.available:
            return cg.pids()
        return tree_pids([p.pid for p in procs])

    def rss(self, role: str, procs: Sequence[Proc]) -> list[int]:
        return rss_of(self.pids(role, procs))

    def wait_exits(self, procs: Sequence[Proc], timeout_s: float) -> list[float | None]:
        daemons = [p for p in procs if isinstance(p, Daemon)]
        if len(daemons) != len(procs):
            raise TypeError("a local place waits for its own daemons only")
        return wait_exits(daemons, timeout_s)

    def stop(self, procs: Sequence[Proc]) -> None:
        daemons = [p for p in procs if isinstance(p, Daemon)]
        if len(daemons) != len(procs):
            raise TypeError("a local place stops its own daemons only")
        stop_daemons(daemons)
