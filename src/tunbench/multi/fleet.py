"""Fleet: one tunnel server and N tunnel clients, run from an adapter's `[multi]` table.

The generic single-client runner (tunnels/adapter.py) brings one client up step by step; a fleet must
start hundreds at once, so it splits a client's life in two: `launch(i)` spawns the client's daemon (cheap,
done at the offered rate), and `settle(i)` waits for that client's own ready probes and runs its `after`
commands (on a thread pool). Per-client failures are returned, not raised: a storm counts them.
Every daemon is in its own process group, recorded in the ledger, in the role's cgroup; `stop_clients`
ends many at once (SIGTERM to every group, then one wait) instead of one by one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

from tunbench.errors import ConfigError, TunbenchError, TunnelError
from tunbench.monitor.cgroup import RoleCgroup
from tunbench.multi.layout import Layout, client_addr, client_inner
from tunbench.proc import Daemon, run_cmd
from tunbench.state import Ledger
from tunbench.tunnels import probes
from tunbench.tunnels.adapter import IPERF_PORT
from tunbench.tunnels.registry import TunnelRef
from tunbench.tunnels.spec import CmdProbe, FileProbe, LogProbe, MultiSpec, PingProbe, PortProbe, Probe, RoleSpec
from tunbench.tunnels.template import render, render_argv

log = logging.getLogger(__name__)

KEY_POOL = 4  # concurrent per-client key steps (openssl, wg genkey)
SETTLE_POOL = 16
# a uid of its own per client ({client_uid}): per-uid kernel limits (inotify instances: 128) are host-wide
CLIENT_UID_BASE = 2_000_000_000  # concurrent per-client readiness waits + after-commands


def ns_command(argv: list[str], netns: str | None) -> tuple[list[str], str | None]:
    """`ip ...` inside a namespace runs as `ip -n NS ...` (no `ip netns exec` mount set-up: several times
    cheaper, which matters x500); anything else keeps running through `ip netns exec`."""
    if netns and argv and argv[0] == "ip" and len(argv) > 1 and argv[1] not in ("netns", "-n", "-netns"):
        return ["ip", "-n", netns, *argv[1:]], None
    return argv, netns


def shared_variables(layout: Layout, workdir: Path, port_base: int = IPERF_PORT) -> dict[str, str]:
    return {
        "tmp": str(workdir),
        "prefix": layout.prefix,
        "server_ns": layout.server_ns,
        "server_addr": layout.server_addr,
        "inner_server": layout.inner_server,
        "inner_prefixlen": str(layout.inner_prefixlen),
        "inner_netmask": layout.inner_netmask,
        "inner_network": layout.inner_network,
        "dev_server": layout.server_dev,
        "iperf_port": str(port_base),
        "link_mtu": str(layout.mtu),
        "clients": str(layout.clients),
    }


def client_variables(layout: Layout, i: int) -> dict[str, str]:
    return {
        "i": str(i),
        "client_ns": layout.client_ns(i),
        "client_addr": client_addr(i),
        "client_inner": client_inner(i),
        "dev_client": layout.client_dev(i),
        "client_uid": str(CLIENT_UID_BASE + i),
    }


class Fleet:
    """`with Fleet(ref, layout, ...) as fleet:` keys are made and files written; then start_server(),
    launch(i)/settle(i) per client, stop_clients(...); everything is stopped on exit."""

    def __init__(
        self,
        ref: TunnelRef,
        layout: Layout,
        ledger: Ledger,
        workdir: Path,
        cgroups: dict[str, RoleCgroup],
    ) -> None:
        multi = ref.adapter.spec.multi
        if multi is None:
            raise ConfigError(
                f"tunnel {ref.name!r} has no [multi] table: it cannot run many clients (docs/adapters.md)",
                source=ref.adapter.source,
            )
        if layout.clients > multi.max_clients:
            raise ConfigError(f"{ref.name} supports at most {multi.max_clients} clients", source=ref.adapter.source)
        self.ref = ref
        self.spec = ref.adapter.spec
        self.multi: MultiSpec = multi
        self.source = ref.adapter.source
        self.layout = layout
        self.workdir = workdir
        self.cgroups = cgroups
        self._ledger = ledger
        self.vars: dict[str, str] = {
            **shared_variables(layout, workdir),
            **ref.merged_params(),
            "label": ref.label,
        }
        self.client_vars: dict[int, dict[str, str]] = {}
        self.server: Daemon | None = None
        self.clients: dict[int, Daemon] = {}
        self.launched_at: dict[int, float] = {}
        self.keys_s: float | None = None
        self._cancel = threading.Event()  # set when bringing clients up is abandoned (error, Ctrl-C)
        self.server_up_s: float | None = None

    # ---- lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> Fleet:
        try:
            t0 = time.monotonic()
            self._keys()
            self.keys_s = time.monotonic() - t0
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.stop_clients(list(self.clients))
        finally:
            if self.server is not None:
                self.server.stop()
                self.server = None

    # ---- keys and files ------------------------------------------------------------------------------
    def render_text(self, text: str, variables: dict[str, str], key: str) -> str:
        return render(text, variables, source=self.source, key=key)

    def _run_key(self, run: str, stdin: str | None, variables: dict[str, str], key: str) -> str:
        argv = render_argv(run, variables, source=self.source, key=f"{key}.run")
        data = self.render_text(stdin, variables, f"{key}.stdin") if stdin else None
        return run_cmd(argv, stdin=data, cwd=self.workdir, what=f"{self.spec.name} {key}").stdout.strip()

    def _write(self, path_t: str, content_t: str, mode: str, variables: dict[str, str], key: str) -> None:
        rel = self.render_text(path_t, variables, f"{key}.path")
        if rel.startswith("/") or ".." in rel.split("/"):
            raise ConfigError(f"file path {rel!r} must stay in the trial's directory", source=self.source, key=key)
        path = self.workdir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, int(mode, 8))
        with os.fdopen(fd, "w") as out:
            out.write(self.render_text(content_t, variables, f"{key}.content"))

    def _keys(self) -> None:
        for n, step in enumerate(self.spec.keys):
            self.vars[step.name] = self._run_key(step.run, step.stdin, self.vars, f"keys[{n}]")
        for n, f in enumerate(self.spec.files):
            self._write(f.path, f.content, f.mode, self.vars, f"files[{n}]")

        (self.workdir / "keys").mkdir(exist_ok=True)  # {tmp}/keys/ exists for per-client key files

        def one_client(i: int) -> dict[str, str]:
            v = {**self.vars, **client_variables(self.layout, i)}
            for n, step in enumerate(self.multi.client_keys):
                v[step.name] = self._run_key(step.run, step.stdin, v, f"multi.client_keys[{n}]")
            for n, cf in enumerate(self.multi.client_files):
                self._write(cf.path, cf.content, cf.mode, v, f"multi.client_files[{n}]")
            return v

        with ThreadPoolExecutor(KEY_POOL) as pool:
            results = list(pool.map(one_client, self.layout.indices()))
        self.client_vars = dict(zip(self.layout.indices(), results, strict=True))
        peers = [self.render_text(self.multi.server_peer, v, "multi.server_peer") for v in results]
        self.vars["server_peers"] = "".join(peers)
        for n, mf in enumerate(self.multi.files):
            self._write(mf.path, mf.content, mf.mode, self.vars, f"multi.files[{n}]")

    # ---- roles ----------------------------------------------------------------------------------------
    def _steps(self, steps: list[str], variables: dict[str, str], netns: str, key: str) -> None:
        for n, cmd in enumerate(steps):
            argv, ns = ns_command(render_argv(cmd, variables, source=self.source, key=f"{key}[{n}]"), netns)
            run_cmd(argv, netns=ns, cwd=self.workdir, what=f"{self.spec.name} {key}")

    def _spawn(self, rs: RoleSpec, variables: dict[str, str], netns: str, role: str, name: str, key: str) -> Daemon:
        assert rs.daemon is not None
        argv = render_argv(rs.daemon, variables, source=self.source, key=f"{key}.daemon")
        env = {k: self.render_text(v, variables, f"{key}.env.{k}") for k, v in rs.env.items()}
        cg = self.cgroups.get(role)
        return Daemon(
            argv,
            ledger=self._ledger,
            log_path=self.workdir / f"{name}.log",
            what=f"{self.spec.name} {name}",
            netns=netns,
            env=env,
            cwd=self.workdir,
            cgroup_procs=cg.procs_file if cg and cg.available else None,
        )

    def _probe_ok(self, probe: Probe, variables: dict[str, str], daemon: Daemon | None, netns: str, key: str) -> bool:
        src = self.source
        match probe:
            case LogProbe():
                return daemon is not None and probes.log_matches(daemon.log_path, probe.pattern)
            case PortProbe():
                port = int(render(probe.port, variables, source=src, key=f"{key}.port"))
                ns = netns if probe.ns == "client" else self.layout.server_ns
                return probes.port_open(ns, port, probe.proto)
            case PingProbe():
                ns = netns if probe.ns == "client" else self.layout.server_ns
                return probes.ping_ok(ns, render(probe.address, variables, source=src, key=f"{key}.address"))
            case FileProbe():
                return Path(render(probe.path, variables, source=src, key=f"{key}.path")).exists()
            case CmdProbe():
                ns2 = {"client": netns, "server": self.layout.server_ns}.get(probe.ns)
                argv = render_argv(probe.run, variables, source=src, key=f"{key}.run")
                return probes.cmd_ok(argv, ns2, self.workdir)
        return False

    def _wait(
        self,
        plist: list[Probe],
        variables: dict[str, str],
        daemon: Daemon | None,
        netns: str,
        key: str,
        timeout_s: float,
    ) -> None:
        deadline = time.monotonic() + timeout_s
        for n, probe in enumerate(plist):
            delay = 0.01
            while not self._probe_ok(probe, variables, daemon, netns, f"{key}.ready[{n}]"):
                if self._cancel.is_set():
                    raise TunnelError(f"{key}: abandoned")
                if daemon is not None and not daemon.alive():
                    raise TunnelError(f"{key}: process exited (code {daemon.proc.returncode})\n{daemon.log_tail(10)}")
                if time.monotonic() > deadline:
                    tail = daemon.log_tail(10) if daemon else ""
                    raise TunnelError(f"{key}: probe ready[{n}] ({probe.kind}) never passed in {timeout_s:g} s\n{tail}")
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    def start_server(self) -> None:
        t0 = time.monotonic()
        rs, ns = self.multi.server, self.layout.server_ns
        try:
            self._steps(rs.before, self.vars, ns, "multi.server.before")
            if rs.daemon:
                self.server = self._spawn(rs, self.vars, ns, "server", "server", "multi.server")
            self._wait(rs.ready, self.vars, self.server, ns, "multi.server", self.spec.ready_timeout_s)
            self._steps(rs.after, self.vars, ns, "multi.server.after")
        except TunbenchError as e:
            if isinstance(e, TunnelError):
                raise TunnelError(f"{self.ref.label}: server: {e}") from e
            raise TunnelError(f"{self.ref.label}: server: {e}{self._server_log()}") from e
        self.server_up_s = time.monotonic() - t0

    def _server_log(self) -> str:
        tail = self.server.log_tail(15) if self.server else ""
        return f"\n--- server log ---\n{tail}" if tail else ""

    def launch(self, i: int) -> None:
        """Spawn client i's daemon (its `before` commands first). Raises on failure to spawn."""
        rs, v, ns = self.multi.client, self.client_vars[i], self.layout.client_ns(i)
        self._steps(rs.before, v, ns, f"multi.client[{i}].before")
        self.launched_at[i] = time.monotonic()
        if rs.daemon:
            self.clients[i] = self._spawn(rs, v, ns, "clients", f"client{i}", f"multi.client[{i}]")

    def settle(self, i: int, timeout_s: float) -> str | None:
        """Wait for client i's own ready probes, then run its `after` commands. Returns an error or None."""
        rs, v, ns = self.multi.client, self.client_vars[i], self.layout.client_ns(i)
        try:
            self._wait(rs.ready, v, self.clients.get(i), ns, f"client {i}", timeout_s)
            self._steps(rs.after, v, ns, f"multi.client[{i}].after")
        except TunbenchError as e:
            return str(e)
        return None

    def up(
        self,
        indices: Iterable[int],
        *,
        rate_per_s: float = 0.0,
        timeout_s: float = 60.0,
        on_launch: Callable[[int], None] | None = None,
        retries: int = 0,
    ) -> dict[int, str]:
        """Launch clients (all at once, or `rate_per_s` per second) and settle each on a pool. Returns the
        errors of the clients that failed (index -> message). With `retries`, a client that failed is
        stopped and launched again (that many times) before it counts as failed."""
        errors: dict[int, str] = {}
        t0 = time.monotonic()
        pool = ThreadPoolExecutor(SETTLE_POOL)
        try:
            futures = {}
            for n, i in enumerate(indices):
                if rate_per_s > 0:
                    wait = t0 + n / rate_per_s - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                try:
                    self.launch(i)
                except TunbenchError as e:
                    errors[i] = str(e)
                    continue
                if on_launch:
                    on_launch(i)
                futures[i] = pool.submit(self._settle_retrying, i, timeout_s, retries)
            for i, fut in futures.items():
                err = fut.result()
                if err:
                    errors[i] = err
        except BaseException:
            self._cancel.set()  # pending waits give up at once: Ctrl-C must not wait for a storm's timeout
            pool.shutdown(wait=True, cancel_futures=True)
            self._cancel.clear()
            raise
        pool.shutdown(wait=True)
        return errors

    def _settle_retrying(self, i: int, timeout_s: float, retries: int) -> str | None:
        err = self.settle(i, timeout_s)
        for _ in range(retries):
            if err is None:
                break
            log.warning("client %d failed (%s); launching it again", i, err.splitlines()[0])
            self.stop_clients([i])
            try:
                self.launch(i)
            except TunbenchError as e:
                return str(e)
            err = self.settle(i, timeout_s)
        return err

    def stop_clients(self, indices: list[int]) -> None:
        """End many clients at once: SIGTERM every process group, one wait, SIGKILL what is left."""
        daemons = [self.clients.pop(i) for i in indices if i in self.clients]
        if not daemons:
            return
        for d in daemons:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(d.pid, signal.SIGTERM)
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and any(d.proc.poll() is None for d in daemons):
            time.sleep(0.02)
        for d in daemons:
            d.stop()  # SIGKILLs a group that is still there, reaps it, drops it from the ledger

    def pids(self, role: str) -> list[int]:
        cg = self.cgroups.get(role)
        if cg is not None and cg.available:
            return cg.pids()
        if role == "server":
            return [self.server.pid] if self.server else []
        return [d.pid for d in self.clients.values()]

    def check_server(self) -> None:
        if self.server is not None and not self.server.alive():
            raise TunnelError(
                f"{self.ref.label}: server exited (code {self.server.proc.returncode}){self._server_log()}"
            )

    def client_log_tail(self, i: int, lines: int = 8) -> str:
        d = self.clients.get(i)
        if d is not None:
            return d.log_tail(lines)
        try:
            text = (self.workdir / f"client{i}.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])
