"""The adapter steps every tunnel instance is made of, shared by the one-client `Tunnel` (adapter.py) and the
N-client `Fleet` (fleet.py): render a template, run a key step, write a file, run role commands, spawn a
role's daemon into its cgroup, wait for readiness probes, list a role's processes.

Nothing here decides the order of steps (the two drivers do: one client step by step, or hundreds at a
rate); every error names the adapter file and the key whose template failed.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tunbench.errors import ConfigError, TunnelError
from tunbench.host.cgroup import RoleCgroup
from tunbench.host.ledger import Ledger
from tunbench.host.proc import Daemon, run_cmd, tree_pids
from tunbench.tunnels import probes
from tunbench.tunnels.spec import (
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
# which namespace a probe's or command's role ("client", "server", "host") runs in; None: the host's
NsOf = Callable[[str], str | None]


def ns_command(argv: list[str], netns: str | None) -> tuple[list[str], str | None]:
    """`ip ...` inside a namespace runs as `ip -n NS ...` (no `ip netns exec` mount set-up: several times
    cheaper, which matters x500); anything else keeps running through `ip netns exec`."""
    if netns and argv and argv[0] == "ip" and len(argv) > 1 and argv[1] not in ("netns", "-n", "-netns"):
        return ["ip", "-n", netns, *argv[1:]], None
    return argv, netns


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
        """Write a templated file (path and content) inside the trial's directory, with its mode."""
        rel = self.render(path_t, variables, f"{key}.path")
        if rel.startswith("/") or ".." in rel.split("/"):
            raise ConfigError(f"file path {rel!r} must stay in the trial's directory", source=self.source, key=key)
        path = self.workdir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, int(mode, 8))
        with os.fdopen(fd, "w") as out:
            out.write(self.render(content_t, variables, f"{key}.content"))

    def commands(self, commands: Sequence[str], variables: Vars, netns: str | None, key: str) -> None:
        """A role's `before` or `after` commands, in order, inside its namespace."""
        for n, cmd in enumerate(commands):
            argv, ns = ns_command(self.argv(cmd, variables, f"{key}[{n}]"), netns)
            run_cmd(argv, netns=ns, cwd=self.workdir, what=f"{self.spec.name} {key}")

    # ---- daemons -----------------------------------------------------------------------------------
    def spawn(self, rs: RoleSpec, variables: Vars, netns: str | None, role: str, name: str, key: str) -> Daemon:
        """Start a role's daemon in its namespace, its own process group and the role's cgroup; its output
        goes to `<name>.log` in the trial's directory."""
        assert rs.daemon is not None
        argv = self.argv(rs.daemon, variables, f"{key}.daemon")
        env = {k: self.render(v, variables, f"{key}.env.{k}") for k, v in rs.env.items()}
        cg = self.cgroups.get(role)
        return Daemon(
            argv,
            ledger=self.ledger,
            log_path=self.workdir / f"{name}.log",
            what=f"{self.spec.name} {name}",
            netns=netns,
            env=env,
            cwd=self.workdir,
            cgroup_procs=cg.procs_file if cg is not None and cg.available else None,
        )

    def pids(self, role: str, daemons: Sequence[Daemon]) -> list[int]:
        """Every process of a role: its cgroup's members, or else the daemons' process trees."""
        cg = self.cgroups.get(role)
        if cg is not None and cg.available:
            return cg.pids()
        return tree_pids([d.pid for d in daemons])

    # ---- readiness -----------------------------------------------------------------------------------
    def probe_ok(
        self, probe: Probe, variables: Vars, *, ns_of: NsOf, daemon_of: Callable[[str], Daemon | None], key: str
    ) -> bool:
        match probe:
            case LogProbe():
                d = daemon_of(probe.role)
                return d is not None and probes.log_matches(d.log_path, probe.pattern)
            case PortProbe():
                port = int(self.render(probe.port, variables, f"{key}.port"))
                return probes.port_open(ns_of(probe.ns) or "", port, probe.proto)
            case PingProbe():
                return probes.ping_ok(ns_of(probe.ns) or "", self.render(probe.address, variables, f"{key}.address"))
            case FileProbe():
                return Path(self.render(probe.path, variables, f"{key}.path")).exists()
            case CmdProbe():
                argv = self.argv(probe.run, variables, f"{key}.run")
                return probes.cmd_ok(argv, ns_of(probe.ns), self.workdir)
        return False

    def wait(
        self,
        plist: Sequence[Probe],
        variables: Vars,
        *,
        ns_of: NsOf,
        daemon_of: Callable[[str], Daemon | None],
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
            while not self.probe_ok(probe, variables, ns_of=ns_of, daemon_of=daemon_of, key=f"{key}[{n}]"):
                if cancel is not None and cancel.is_set():
                    raise TunnelError(f"{key}: abandoned")
                check()
                if time.monotonic() > deadline:
                    raise timed_out(n, probe)
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
