"""The one generic adapter runner: keys -> files -> server (before, daemon, ready, after) -> client (same)
-> tunnel-wide ready probes -> target. Everything it starts is stopped on exit, client first."""

from __future__ import annotations

import contextlib
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tunbench.errors import TunbenchError, TunnelError
from tunbench.host.cgroup import RoleCgroup
from tunbench.host.ledger import Ledger
from tunbench.host.proc import Daemon, run_cmd
from tunbench.topology.build import Topology
from tunbench.tunnels.registry import TunnelRef
from tunbench.tunnels.spec import (
    Probe,
    RoleSpec,
)
from tunbench.tunnels.steps import Steps
from tunbench.tunnels.template import render_argv

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
        self.steps = Steps(self.spec, self.source, workdir, ledger, cgroups)
        self._stack = contextlib.ExitStack()
        self.daemons: dict[str, Daemon] = {}
        self.vars: dict[str, str] = {**base_variables(topo, workdir), **ref.merged_params(), "label": ref.label}
        self.setup_s: float | None = None
        self.target: Target | None = None

    # ---- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> Tunnel:
        t0 = time.monotonic()
        try:
            for i, step in enumerate(self.spec.keys):
                self.vars[step.name] = self.steps.key(step, self.vars, f"keys[{i}]")
            for i, f in enumerate(self.spec.files):
                self.steps.write(f.path, f.content, f.mode, self.vars, f"files[{i}]")
            for role in ROLES:
                self._role_up(role, getattr(self.spec, role))
            self._wait(self.spec.ready, "ready")
            self.target = Target(
                self.steps.render(self.spec.target.address, self.vars, "target.address"),
                int(self.steps.render(self.spec.target.port, self.vars, "target.port")),
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
        d = self.daemons.get(role)
        return self.steps.pids(role, [d] if d else [])

    def check_alive(self) -> None:
        for role, d in self.daemons.items():
            if not d.alive():
                raise TunnelError(f"{self.ref.label}: {role} process exited (code {d.proc.returncode}){self._logs()}")

    # ---- steps -----------------------------------------------------------------------------------
    def _ns(self, role: str) -> str | None:
        return {"client": self.topo.client.name, "server": self.topo.server.name}.get(role)

    def _role_up(self, role: str, rs: RoleSpec) -> None:
        self.steps.commands(rs.before, self.vars, self._ns(role), f"{role}.before")
        if rs.daemon:
            d = self.steps.spawn(rs, self.vars, self._ns(role), role, role, role)
            self._stack.callback(d.stop)
            self.daemons[role] = d
        self._wait(rs.ready, f"{role}.ready")
        self.steps.commands(rs.after, self.vars, self._ns(role), f"{role}.after")

    def _wait(self, plist: list[Probe], key: str) -> None:
        timeout = self.spec.ready_timeout_s

        def timed_out(n: int, probe: Probe) -> Exception:
            return TunnelError(
                f"{self.ref.label}: not ready after {timeout:g} s: "
                f"probe {key}[{n}] ({probe.kind}) never passed{self._logs()}"
            )

        self.steps.wait(
            plist,
            self.vars,
            ns_of=self._ns,
            daemon_of=self.daemons.get,
            key=key,
            deadline=time.monotonic() + timeout,
            check=self.check_alive,
            timed_out=timed_out,
        )

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
