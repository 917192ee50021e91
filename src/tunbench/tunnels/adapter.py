"""The one generic adapter runner: keys -> files -> server (before, daemon, ready, after) -> client (same)
-> tunnel-wide ready probes -> target. Everything it starts is stopped on exit, client first."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tunbench.errors import TunbenchError, TunnelError
from tunbench.monitor.cgroup import RoleCgroup
from tunbench.monitor.sampler import tree_pids
from tunbench.proc import Daemon, run_cmd
from tunbench.state import Ledger
from tunbench.topology.build import Topology
from tunbench.tunnels import probes
from tunbench.tunnels.registry import TunnelRef
from tunbench.tunnels.spec import (
    CmdProbe,
    FileProbe,
    LogProbe,
    PingProbe,
    PortProbe,
    Probe,
    RoleSpec,
)
from tunbench.tunnels.template import render, render_argv

log = logging.getLogger(__name__)

IPERF_PORT = 5201
PROXY_PORT = 15201
ROLES = ("server", "client")


@dataclass(frozen=True)
class Target:
    address: str
    port: int


def base_variables(topo: Topology, workdir: Path) -> dict[str, str]:
    a = topo.addr
    return {
        "tmp": str(workdir),
        "prefix": topo.prefix,
        "client_ns": topo.client.name,
        "server_ns": topo.server.name,
        "client_addr": a.client,
        "server_addr": a.server,
        "client_addr6": a.client6,
        "server_addr6": a.server6,
        "inner_client": a.inner_client,
        "inner_server": a.inner_server,
        "inner_prefixlen": str(a.inner_prefixlen),
        "dev_client": topo.ifname("tc"),
        "dev_server": topo.ifname("ts"),
        "iperf_port": str(IPERF_PORT),
        "proxy_port": str(PROXY_PORT),
        "link_mtu": str(topo.spec.mtu),
    }


class Tunnel:
    """`with Tunnel(ref, topo, ...) as t:` the tunnel is up and t.target reaches the server through it."""

    def __init__(
        self,
        ref: TunnelRef,
        topo: Topology,
        ledger: Ledger,
        workdir: Path,
        cgroups: dict[str, RoleCgroup],
    ) -> None:
        self.ref = ref
        self.spec = ref.adapter.spec
        self.source = ref.adapter.source
        self.topo = topo
        self.workdir = workdir
        self.cgroups = cgroups
        self._ledger = ledger
        self._stack = contextlib.ExitStack()
        self.daemons: dict[str, Daemon] = {}
        self.vars: dict[str, str] = {**base_variables(topo, workdir), **ref.merged_params(), "label": ref.label}
        self.setup_s: float | None = None
        self.target: Target | None = None

    # ---- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> Tunnel:
        t0 = time.monotonic()
        try:
            self._keys()
            self._files()
            for role in ROLES:
                self._role_up(role, getattr(self.spec, role))
            self._wait(self.spec.ready, "tunnel")
            self.target = Target(
                render(self.spec.target.address, self.vars, source=self.source, key="target.address"),
                int(render(self.spec.target.port, self.vars, source=self.source, key="target.port")),
            )
        except BaseException as e:
            self._stack.close()
            if isinstance(e, TunbenchError) and not isinstance(e, TunnelError):
                raise TunnelError(f"{self.ref.label}: {e}{self._logs()}") from e
            raise
        self.setup_s = time.monotonic() - t0
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._stack.close()

    def pids(self, role: str) -> list[int]:
        cg = self.cgroups.get(role)
        if cg is not None and cg.available:
            return cg.pids()
        d = self.daemons.get(role)
        return tree_pids([d.pid]) if d else []

    def check_alive(self) -> None:
        for role, d in self.daemons.items():
            if not d.alive():
                raise TunnelError(f"{self.ref.label}: {role} process exited (code {d.proc.returncode}){self._logs()}")

    # ---- steps -----------------------------------------------------------------------------------
    def _keys(self) -> None:
        for i, step in enumerate(self.spec.keys):
            key = f"keys[{i}]"
            argv = render_argv(step.run, self.vars, source=self.source, key=f"{key}.run")
            stdin = render(step.stdin, self.vars, source=self.source, key=f"{key}.stdin") if step.stdin else None
            res = run_cmd(argv, stdin=stdin, cwd=self.workdir, what=f"{self.spec.name} key step {step.name}")
            self.vars[step.name] = res.stdout.strip()

    def _files(self) -> None:
        for i, f in enumerate(self.spec.files):
            path = self.workdir / f.path
            content = render(f.content, self.vars, source=self.source, key=f"files[{i}].content")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, int(f.mode, 8))
            with os.fdopen(fd, "w") as out:
                out.write(content)

    def _ns(self, role: str) -> str | None:
        return {"client": self.topo.client.name, "server": self.topo.server.name}.get(role)

    def _run_steps(self, role: str, steps: list[str], phase: str) -> None:
        for i, cmd in enumerate(steps):
            argv = render_argv(cmd, self.vars, source=self.source, key=f"{role}.{phase}[{i}]")
            run_cmd(argv, netns=self._ns(role), cwd=self.workdir, what=f"{self.spec.name} {role} {phase}")

    def _role_up(self, role: str, rs: RoleSpec) -> None:
        self._run_steps(role, rs.before, "before")
        if rs.daemon:
            argv = render_argv(rs.daemon, self.vars, source=self.source, key=f"{role}.daemon")
            env = {k: render(v, self.vars, source=self.source, key=f"{role}.env.{k}") for k, v in rs.env.items()}
            cg = self.cgroups.get(role)
            d = Daemon(
                argv,
                ledger=self._ledger,
                log_path=self.workdir / f"{role}.log",
                what=f"{self.spec.name} {role}",
                netns=self._ns(role),
                env=env,
                cwd=self.workdir,
                cgroup_procs=cg.procs_file if cg else None,
            )
            self._stack.callback(d.stop)
            self.daemons[role] = d
        self._wait(rs.ready, role)
        self._run_steps(role, rs.after, "after")

    # ---- probes ----------------------------------------------------------------------------------
    def _probe_ok(self, probe: Probe, key: str) -> bool:
        v, src = self.vars, self.source
        match probe:
            case LogProbe():
                d = self.daemons.get(probe.role)
                return d is not None and probes.log_matches(d.log_path, probe.pattern)
            case PortProbe():
                port = int(render(probe.port, v, source=src, key=f"{key}.port"))
                return probes.port_open(self._ns(probe.ns) or "", port, probe.proto)
            case PingProbe():
                return probes.ping_ok(
                    self._ns(probe.ns) or "", render(probe.address, v, source=src, key=f"{key}.address")
                )
            case FileProbe():
                return Path(render(probe.path, v, source=src, key=f"{key}.path")).exists()
            case CmdProbe():
                argv = render_argv(probe.run, v, source=src, key=f"{key}.run")
                return probes.cmd_ok(argv, self._ns(probe.ns), self.workdir)
        return False

    def _wait(self, plist: list[Probe], where: str) -> None:
        deadline = time.monotonic() + self.spec.ready_timeout_s
        prefix = "ready" if where == "tunnel" else f"{where}.ready"
        for i, probe in enumerate(plist):
            delay = 0.01
            while not self._probe_ok(probe, f"{prefix}[{i}]"):
                self.check_alive()
                if time.monotonic() > deadline:
                    raise TunnelError(
                        f"{self.ref.label}: not ready after {self.spec.ready_timeout_s:g} s: "
                        f"probe {prefix}[{i}] ({probe.kind}) never passed{self._logs()}"
                    )
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    def _logs(self) -> str:
        parts = []
        for role, d in self.daemons.items():
            tail = d.log_tail(15)
            if tail:
                parts.append(f"\n--- {role} log ({d.log_path}) ---\n{tail}")
        return "".join(parts)


def tunnel_version(ref: TunnelRef) -> str:
    """The first line the adapter's version command prints (any exit code), or '' if it has none."""
    spec = ref.adapter.spec
    if not spec.version:
        return ""
    try:
        argv = render_argv(spec.version, ref.merged_params(), source=ref.adapter.source, key="version")
        res = run_cmd(argv, check=False, timeout_s=10)
    except TunbenchError as e:
        return f"unknown ({e})"
    text = (res.stdout + "\n" + res.stderr).strip()
    if spec.version_regex:
        m = re.search(spec.version_regex, text)
        return m.group(1) if m and m.groups() else (m.group(0) if m else text.splitlines()[0] if text else "")
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
