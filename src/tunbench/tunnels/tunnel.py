"""The one generic adapter runner: keys -> files -> server (before, daemon, ready, after) -> client (same)
-> tunnel-wide ready probes -> target. Everything it starts is stopped on exit, client first."""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Protocol

from tunbench.errors import TunbenchError, TunnelError
from tunbench.host.cgroup import RoleCgroup
from tunbench.host.ledger import Ledger
from tunbench.host.place import Place, Proc
from tunbench.host.proc import run_cmd
from tunbench.topology.addresses import AddressPlan, Family
from tunbench.topology.build import TopologySpec
from tunbench.tunnels.adapter import (
    CmdHandshakes,
    LogHandshakes,
    Probe,
    RoleSpec,
)
from tunbench.tunnels.handshakes import HandshakeReader, log_count, numbers, reading_value, socket_reply
from tunbench.tunnels.registry import TunnelRef
from tunbench.tunnels.steps import Steps
from tunbench.tunnels.template import render_argv

log = logging.getLogger(__name__)

IPERF_PORT = 5201
# an L4 proxy listens in the client's namespace on the port number it forwards to in the server's: netperf's
# data connection through it (workloads/netperf.py) is aimed at the port netserver listens on
PROXY_PORT = IPERF_PORT
ROLES = ("server", "client")


@dataclass(frozen=True)
class Target:
    address: str
    port: int


class Placed(Protocol):
    """What a tunnel needs from its topology: the run prefix, addresses, device names, the link's MTU, and
    the place of each role (a namespace here, or a host reached over SSH)."""

    prefix: str
    addr: AddressPlan
    spec: TopologySpec

    def ifname(self, suffix: str) -> str: ...

    def place(self, role: str) -> Place | None:
        """A role's remote place, or None: the namespace `ns_name(role)` of this machine."""
        ...

    def ns_name(self, role: str) -> str: ...


def base_variables(topo: Placed, workdir: Path, underlay: Family = "ipv4", overlay: Family = "ipv4") -> dict[str, str]:
    """The variables every adapter gets (docs/adapters.md, "Variables"). `client_addr`/`server_addr` and the
    `inner_*` addresses follow the run's families; the `*4`/`*6` names are always that family's."""
    a = topo.addr
    v6, inner6 = underlay == "ipv6", overlay == "ipv6"
    client, server = (a.client6, a.server6) if v6 else (a.client, a.server)
    return {
        "tmp": str(workdir),
        "prefix": topo.prefix,
        "client_ns": topo.ns_name("client"),
        "server_ns": topo.ns_name("server"),
        "underlay": underlay,
        "overlay": overlay,
        "underlay_ip": "6" if v6 else "4",
        "overlay_ip": "6" if inner6 else "4",
        "client_addr": client,
        "server_addr": server,
        "client_endpoint": f"[{client}]" if v6 else client,
        "server_endpoint": f"[{server}]" if v6 else server,
        "underlay_prefixlen": str(a.prefixlen6 if v6 else a.prefixlen),
        "client_addr4": a.client,
        "server_addr4": a.server,
        "client_addr6": a.client6,
        "server_addr6": a.server6,
        "inner_client": a.inner_client6 if inner6 else a.inner_client,
        "inner_server": a.inner_server6 if inner6 else a.inner_server,
        "inner_prefixlen": str(a.inner_prefixlen6 if inner6 else a.inner_prefixlen),
        "inner_hostlen": "128" if inner6 else "32",
        "inner_client4": a.inner_client,
        "inner_server4": a.inner_server,
        "inner_prefixlen4": str(a.inner_prefixlen),
        "inner_client6": a.inner_client6,
        "inner_server6": a.inner_server6,
        "inner_prefixlen6": str(a.inner_prefixlen6),
        "dev_client": topo.ifname("tc"),
        "dev_server": topo.ifname("ts"),
        "iperf_port": str(IPERF_PORT),
        "proxy_port": str(PROXY_PORT),
        "link_mtu": str(topo.spec.mtu),
    }


DaemonWrap = Callable[[str, list[str], dict[str, str], Place], tuple[list[str], dict[str, str]]]
"""(role, argv, env, the place it starts at) -> the daemon's argv and env as started: a wrapper around a role's
daemon, on this machine or on its host (perf/instructions.py starts it under callgrind, that machine's)."""


class Tunnel:
    """`with Tunnel(ref, topo, ...) as t:` the tunnel is up and t.target reaches the server through it.
    `wrap`: applied to each role's daemon, wherever it runs (given its place)."""

    def __init__(
        self,
        ref: TunnelRef,
        topo: Placed,
        ledger: Ledger,
        workdir: Path,
        cgroups: dict[str, RoleCgroup],
        wrap: DaemonWrap | None = None,
    ) -> None:
        self.ref = ref
        self.wrap = wrap
        self.spec = ref.adapter.spec
        self.source = ref.adapter.source
        self.topo = topo
        self.workdir = workdir
        self.cgroups = cgroups
        self.steps = Steps(self.spec, self.source, workdir, ledger, cgroups)
        self._host = self.steps.local(None)
        self._places: dict[str, Place] = {}
        self._stack = contextlib.ExitStack()
        self.daemons: dict[str, Proc] = {}
        self.vars: dict[str, str] = {
            **base_variables(topo, workdir, ref.underlay, ref.overlay),
            **ref.merged_params(),
            "label": ref.label,
        }
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
            elsewhere = [p for p in map(self._place, ROLES) if p.workdir != self.workdir]
            for place in elsewhere:  # a remote place: the keys and files there, with its own `{tmp}`
                place.put_files(self.steps.files_for(place.workdir))
            for role in ROLES:
                self._role_up(role, getattr(self.spec, role))
            self._wait(self.spec.ready, "ready", self._place("client"))
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
        return self._place(role).pids(role, [d] if d else [])

    def handshakes(self) -> HandshakeReader | None:
        """The tunnel's handshake counter as its adapter declares it (`[handshakes]`), or None: it declares
        none (a unix socket on another machine, a remote role's, reads as unknown). Its templates are rendered here,
        so an unknown variable fails now, not at each reading."""
        hs = self.spec.handshakes
        if hs is None:
            return None
        if isinstance(hs, LogHandshakes):
            daemon, pattern = self.daemons[hs.role], hs.pattern

            def log() -> str | None:
                # the daemon was ready, so its log has lines: an empty one is a read that failed (not a count
                # of 0, which would then look like a restart)
                return daemon.log_tail(1_000_000) or None

            return HandshakeReader("count", log, lambda text, _: log_count(pattern, text))
        if isinstance(hs, CmdHandshakes):
            place = self._place(hs.ns)
            argv = self.steps.argv(hs.run, self._vars(place), "handshakes.run")
            what = f"{self.spec.name} handshakes"

            def text() -> str | None:
                res = place.run(argv, check=False, timeout_s=5, what=what)
                return res.stdout if res.returncode == 0 else None

        else:
            place = self._place(hs.role)
            v = self._vars(place)
            path, until = self.steps.render(hs.path, v, "handshakes.path"), hs.until
            send = self.steps.render(hs.send, v, "handshakes.send")
            here = not place.machine  # this machine's

            def text() -> str | None:
                # a socket on another machine cannot be reached from here: every reading fails and the figure
                # is unknown (None), not missing as for a tunnel that declares no counter
                return socket_reply(path, send, until) if here else None

        kind, pattern = hs.value, hs.pattern
        return HandshakeReader(kind, text, lambda out, at_s: reading_value(kind, numbers(pattern, out), at_s))

    def check_alive(self) -> None:
        for role, d in self.daemons.items():
            if not d.alive():
                raise TunnelError(
                    f"{self.ref.label}: {role} process exited (code {d.returncode()}): {last_words(d)}{self._logs()}"
                )

    # ---- steps -----------------------------------------------------------------------------------
    def _place(self, role: str) -> Place:
        """Where a role's commands and probes run: its place; "host" (and anything else) is this machine."""
        if role not in ROLES:
            return self._host
        if role not in self._places:
            self._places[role] = self.topo.place(role) or self.steps.local(self.topo.ns_name(role))
        return self._places[role]

    def _vars(self, place: Place) -> dict[str, str]:
        """The variables as a place sees them: `{tmp}` is its own copy of the trial's directory."""
        return {**self.vars, "tmp": str(place.workdir)}

    def _role_up(self, role: str, rs: RoleSpec) -> None:
        place = self._place(role)
        v = self._vars(place)
        self.steps.commands(rs.before, v, place, f"{role}.before")
        if rs.daemon:
            d = self.steps.spawn(rs, v, place, role, role, role, wrap=self.wrap)
            self._stack.callback(d.stop)
            self.daemons[role] = d
        self._wait(rs.ready, f"{role}.ready", place)
        self.steps.commands(rs.after, v, place, f"{role}.after")

    def _wait(self, plist: list[Probe], key: str, here: Place) -> None:
        timeout = self.spec.ready_timeout_s

        def timed_out(n: int, probe: Probe) -> Exception:
            return TunnelError(
                f"{self.ref.label}: not ready after {timeout:g} s: "
                f"probe {key}[{n}] ({probe.kind}) never passed{self._logs()}"
            )

        self.steps.wait(
            plist,
            self._vars(here),
            place_of=self._place,
            here=here,
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
                parts.append(f"\n--- {role} log ({self._place(role).label}) ---\n{tail}")
        return "".join(parts)


def last_words(proc: Proc, width: int = 160) -> str:
    """The last line a process printed, for the first line of its error (the one a run's table and a CI log
    show), or that it printed nothing."""
    line = next((ln.strip() for ln in reversed(proc.log_tail(20).splitlines()) if ln.strip()), "")
    if not line:
        return "it printed nothing"
    return line if len(line) <= width else line[: width - 1] + "…"


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
