"""The adapter steps every tunnel instance is made of, shared by the one-client `Tunnel` (tunnel.py) and the
N-client `Fleet` (fleet.py): render a template, run a key step, write a file, run role commands, spawn a
role's daemon into its cgroup, wait for readiness probes, list a role's processes.

Nothing here decides the order of steps (the two drivers do: one client step by step, or hundreds at a
rate); every error names the adapter file and the key whose template failed.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tunbench.errors import ConfigError, TunnelError
from tunbench.host.cgroup import RoleCgroup
from tunbench.host.ledger import Ledger
from tunbench.host.place import LocalPlace, Place, Proc
from tunbench.host.proc import run_cmd
from tunbench.tunnels.adapter import (
    AdapterSpec,
    CmdProbe,
    FileProbe,
    KeyStep,
    LogProbe,
    PingProbe,
    PortProbe,
    Probe,
    RoleSpec,
)
from tunbench.tunnels.template import render, render_argv

Vars = dict[str, str]
# the place a probe's or command's role ("client", "server", "host") runs in
PlaceOf = Callable[[str], Place]


class Steps:
    """The steps of one adapter in one trial: its spec, where its error messages point (`source`), the
    trial's private directory, the run's ledger and the role cgroups its daemons join."""

    def __init__(
        self, spec: AdapterSpec, source: str, workdir: Path, ledger: Ledger, cgroups: dict[str, RoleCgroup]
    ) -> None:
        self.spec = spec
        self.source = source
        self.workdir = workdir
        self.ledger = ledger
        self.cgroups = cgroups
        self._templated: list[tuple[str, str, str, dict[str, str], str]] = []  # write()'s, for files_for()

    def local(self, netns: str | None) -> LocalPlace:
        """A namespace of this machine as a place, with the trial's directory and the role cgroups."""
        return LocalPlace(netns, self.ledger, self.workdir, self.cgroups)

    def files(self) -> dict[str, tuple[bytes, int]]:
        """Every file the key and file steps left in the trial's directory (to ship to a remote place)."""
        out = {}
        for path in sorted(self.workdir.rglob("*")):
            if path.is_file() and not path.name.endswith(".log"):
                out[str(path.relative_to(self.workdir))] = (path.read_bytes(), path.stat().st_mode & 0o777)
        return out

    # ---- templates and one-shot steps ----------------------------------------------------------------
    def render(self, text: str, variables: Vars, key: str) -> str:
        return render(text, variables, source=self.source, key=key)

    def argv(self, command: str, variables: Vars, key: str) -> list[str]:
        return render_argv(command, variables, source=self.source, key=key)

    def key(self, step: KeyStep, variables: Vars, key: str) -> str:
        """Run a key step on the host in the trial's directory; its stripped stdout is the value."""
        argv = self.argv(step.run, variables, f"{key}.run")
        data = self.render(step.stdin, variables, f"{key}.stdin") if step.stdin else None
        return run_cmd(argv, stdin=data, cwd=self.workdir, what=f"{self.spec.name} {key}").stdout.strip()

    def write(self, path_t: str, content_t: str, mode: str, variables: Vars, key: str) -> None:
        """Write a templated file (path and content) inside the trial's directory, with its mode; it is
        remembered, so a remote place gets it rendered with its own `{tmp}` (files_for)."""
        rel, data = self._rendered(path_t, content_t, variables, key)
        self._templated.append((path_t, content_t, mode, dict(variables), key))
        path = self.workdir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, int(mode, 8))
        with os.fdopen(fd, "wb") as out:
            out.write(data)

    def _rendered(self, path_t: str, content_t: str, variables: Vars, key: str) -> tuple[str, bytes]:
        rel = self.render(path_t, variables, f"{key}.path")
        if rel.startswith("/") or ".." in rel.split("/"):
            raise ConfigError(f"file path {rel!r} must stay in the trial's directory", source=self.source, key=key)
        return rel, self.render(content_t, variables, f"{key}.content").encode()

    def files_for(self, workdir: Path) -> dict[str, tuple[bytes, int]]:
        """The trial's files as a place whose trial directory is `workdir` needs them: everything the key and
        file steps left here, with each templated file rendered again with `{tmp}` = `workdir` (a config
        that names `{tmp}/server.key` must name the path on that host)."""
        out = self.files()
        for path_t, content_t, mode, variables, key in self._templated:
            rel, data = self._rendered(path_t, content_t, {**variables, "tmp": str(workdir)}, key)
            out[rel] = (data, int(mode, 8))
        return out

    def commands(self, commands: Sequence[str], variables: Vars, place: Place, key: str) -> None:
        """A role's `before` or `after` commands, in order, at its place."""
        for n, cmd in enumerate(commands):
            place.run(self.argv(cmd, variables, f"{key}[{n}]"), what=f"{self.spec.name} {key}")

    # ---- daemons -----------------------------------------------------------------------------------
    def spawn(
        self,
        rs: RoleSpec,
        variables: Vars,
        place: Place,
        role: str,
        name: str,
        key: str,
        wrap: Callable[[str, list[str], dict[str, str], Place], tuple[list[str], dict[str, str]]] | None = None,
    ) -> Proc:
        """Start a role's daemon at its place, in its own process group and the role's cgroup; its output
        goes to `<name>.log` in the place's trial directory. `wrap`: its command line and environment as
        started (tunnel.DaemonWrap)."""
        argv, env = self.daemon(rs, variables, key)
        if wrap is not None:
            argv, env = wrap(role, argv, env, place)
        return place.spawn(argv, what=f"{self.spec.name} {name}", log_name=f"{name}.log", env=env, role=role)

    def daemon(self, rs: RoleSpec, variables: Vars, key: str) -> tuple[list[str], dict[str, str]]:
        """A role's daemon command line and environment, rendered."""
        assert rs.daemon is not None
        argv = self.argv(rs.daemon, variables, f"{key}.daemon")
        env = {k: self.render(v, variables, f"{key}.env.{k}") for k, v in rs.env.items()}
        return argv, env

    # ---- readiness -----------------------------------------------------------------------------------
    def probe_ok(
        self,
        probe: Probe,
        variables: Vars,
        *,
        place_of: PlaceOf,
        here: Place,
        daemon_of: Callable[[str], Proc | None],
        key: str,
    ) -> bool:
        """One poll of a probe; `here` is the place of the role being readied (where a file probe looks)."""
        match probe:
            case LogProbe():
                d = daemon_of(probe.role)
                return d is not None and re.search(probe.pattern, d.log_tail(1_000_000)) is not None
            case PortProbe():
                port = int(self.render(probe.port, variables, f"{key}.port"))
                return place_of(probe.ns).port_open(port, probe.proto)
            case PingProbe():
                address = self.render(probe.address, variables, f"{key}.address")
                argv = ["ping", "-n", "-q", "-c", "1", "-W", "1", address]
                return place_of(probe.ns).run(argv, check=False, timeout_s=3).returncode == 0
            case FileProbe():
                return here.exists(self.render(probe.path, variables, f"{key}.path"))
            case CmdProbe():
                argv = self.argv(probe.run, variables, f"{key}.run")
                return place_of(probe.ns).run(argv, check=False, timeout_s=5).returncode == 0
        return False

    def wait(
        self,
        plist: Sequence[Probe],
        variables: Vars,
        *,
        place_of: PlaceOf,
        here: Place,
        daemon_of: Callable[[str], Proc | None],
        key: str,
        deadline: float,
        check: Callable[[], None] = lambda: None,
        timed_out: Callable[[int, Probe], Exception],
        cancel: threading.Event | None = None,
    ) -> None:
        """Poll each probe in turn (10 ms, doubling to 200 ms) until it passes. Between polls `check()` may
        raise (a daemon died); past `deadline` (time.monotonic()) the error `timed_out(n, probe)` is raised;
        a set `cancel` event gives up at once."""
        for n, probe in enumerate(plist):
            delay = 0.01
            while not self.probe_ok(
                probe, variables, place_of=place_of, here=here, daemon_of=daemon_of, key=f"{key}[{n}]"
            ):
                if cancel is not None and cancel.is_set():
                    raise TunnelError(f"{key}: abandoned")
                check()
                if time.monotonic() > deadline:
                    raise timed_out(n, probe)
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
