"""Fleet: one tunnel server and N tunnel clients, run from an adapter's `[multi]` table.

The generic single-client runner (tunnels/tunnel.py) brings one client up step by step; a fleet must
start hundreds at once, so it splits a client's life in two: `launch(i)` spawns the client's daemon (cheap,
done at the offered rate), and `settle(i)` waits for that client's own ready probes and runs its `after`
commands (on a thread pool). Per-client failures are returned, not raised: a storm counts them.
Every daemon is in its own process group, recorded in the ledger, in the role's cgroup; `stop_clients`
ends many at once (SIGTERM to every group, then one wait) instead of one by one.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Protocol

from tunbench.errors import ConfigError, MachineLost, TunbenchError, TunnelError
from tunbench.host.cgroup import RoleCgroup
from tunbench.host.ledger import Ledger
from tunbench.host.place import Place, Proc, Spawn, Started
from tunbench.topology.layout import Layout, client_inner
from tunbench.tunnels.adapter import MultiSpec, Probe
from tunbench.tunnels.registry import TunnelRef
from tunbench.tunnels.steps import Steps
from tunbench.tunnels.tunnel import IPERF_PORT

log = logging.getLogger(__name__)

KEY_POOL = 4  # concurrent per-client key steps (openssl, wg genkey)
SETTLE_POOL = 16
# a uid of its own per client ({client_uid}): per-uid kernel limits (inotify instances: 128) are host-wide
CLIENT_UID_BASE = 2_000_000_000  # concurrent per-client readiness waits + after-commands


def shared_variables(layout: Layout, workdir: Path, port_base: int = IPERF_PORT) -> dict[str, str]:
    """Many clients run IPv4 inside and out, so the family variables of a one-client trial (`overlay`,
    `inner_hostlen`, `server_endpoint`...) have their IPv4 values: a template both forms share renders."""
    return {
        "tmp": str(workdir),
        "prefix": layout.prefix,
        "server_ns": layout.server_ns,
        "underlay": "ipv4",
        "overlay": "ipv4",
        "underlay_ip": "4",
        "overlay_ip": "4",
        "server_addr": layout.server_addr,
        "server_endpoint": layout.server_addr,
        "inner_server": layout.inner_server,
        "inner_prefixlen": str(layout.inner_prefixlen),
        "inner_hostlen": "32",
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
        "client_addr": layout.client_address(i),
        "client_endpoint": layout.client_address(i),
        "client_inner": client_inner(i),
        "dev_client": layout.client_dev(i),
        "client_uid": str(CLIENT_UID_BASE + i),
    }


class FleetPlaces(Protocol):
    """Where a fleet's roles run: the server's place, and each client's (namespaces of this machine, or a
    server host and client hosts' namespaces: sites/hosts_fleet.py)."""

    @property
    def server(self) -> Place: ...

    def client(self, i: int) -> Place: ...

    @property
    def batched(self) -> bool:
        """Whether spawn_batch launches (client hosts) or the fleet launches one by one (this machine)."""
        ...

    def spawn_batch(self, spawns: dict[int, Spawn], start_at: float | None) -> dict[int, Started]:
        """Start these clients' daemons (by fleet index) in as few requests as the places allow, from
        `start_at` (this machine's monotonic clock; None: at once); only where `batched`."""
        ...


class LocalFleetPlaces:
    """The namespaces of a local switched topology (the layout's names), with the trial's directory and cgroups."""

    def __init__(self, steps: Steps, layout: Layout) -> None:
        self._steps = steps
        self._layout = layout
        self.server: Place = steps.local(layout.server_ns)

    def client(self, i: int) -> Place:
        return self._steps.local(self._layout.client_ns(i))

    batched = False  # a local spawn is no round trip: Fleet.up launches one by one

    def spawn_batch(self, spawns: dict[int, Spawn], start_at: float | None) -> dict[int, Started]:
        raise NotImplementedError("this machine's clients are launched one by one (not batched)")


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
        places: FleetPlaces | None = None,
    ) -> None:
        """`places`: where the roles run (default: the layout's namespaces on this machine); keys and files
        are made here, in `workdir`, and copied to a place whose trial directory is elsewhere."""
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
        self.steps = Steps(self.spec, self.source, workdir, ledger, cgroups)
        self._host = self.steps.local(None)
        self.places: FleetPlaces = places or LocalFleetPlaces(self.steps, layout)
        self.vars: dict[str, str] = {
            **shared_variables(layout, workdir),
            **ref.merged_params(),
            "label": ref.label,
        }
        self.client_vars: dict[int, dict[str, str]] = {}
        self.server: Proc | None = None
        self.clients: dict[int, Proc] = {}
        self.launched_at: dict[int, float] = {}
        self.started_at: float | None = None  # the agreed instant of the last batch launch (Fleet.up)
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
    def _keys(self) -> None:
        st = self.steps
        for n, step in enumerate(self.spec.keys):
            self.vars[step.name] = st.key(step, self.vars, f"keys[{n}]")
        for n, f in enumerate(self.spec.files):
            st.write(f.path, f.content, f.mode, self.vars, f"files[{n}]")

        (self.workdir / "keys").mkdir(exist_ok=True)  # {tmp}/keys/ exists for per-client key files

        def one_client(i: int) -> dict[str, str]:
            v = {**self.vars, **client_variables(self.layout, i)}
            for n, step in enumerate(self.multi.client_keys):
                v[step.name] = st.key(step, v, f"multi.client_keys[{n}]")
            for n, cf in enumerate(self.multi.client_files):
                st.write(cf.path, cf.content, cf.mode, v, f"multi.client_files[{n}]")
            return v

        with ThreadPoolExecutor(KEY_POOL) as pool:
            results = list(pool.map(one_client, self.layout.indices()))
        self.client_vars = dict(zip(self.layout.indices(), results, strict=True))
        peers = [st.render(self.multi.server_peer, v, "multi.server_peer") for v in results]
        self.vars["server_peers"] = "".join(peers)
        for n, mf in enumerate(self.multi.files):
            st.write(mf.path, mf.content, mf.mode, self.vars, f"multi.files[{n}]")
        places = [self.places.server, *(place for place, _ in self.machines(self.layout.indices()).values())]
        elsewhere = {(p.machine, str(p.workdir)): p for p in places}
        elsewhere.pop(("", str(self.workdir)), None)
        for place in elsewhere.values():  # a remote place (the clients share one trial directory per host)
            place.put_files(st.files_for(place.workdir))  # with its own `{tmp}`

    def machines(self, indices: Iterable[int]) -> dict[str, tuple[Place, list[int]]]:
        """The clients `indices` by the machine they run on: its first client's place, and theirs."""
        out: dict[str, tuple[Place, list[int]]] = {}
        for i in indices:
            place = self.places.client(i)
            out.setdefault(place.machine, (place, []))[1].append(i)
        return out

    @staticmethod
    def _at(variables: dict[str, str], place: Place) -> dict[str, str]:
        """The variables as a place sees them: `{tmp}` is its own copy of the trial's directory."""
        return {**variables, "tmp": str(place.workdir)}

    # ---- roles ----------------------------------------------------------------------------------------
    def _wait(
        self,
        plist: list[Probe],
        variables: dict[str, str],
        daemon: Proc | None,
        here: Place,
        key: str,
        timeout_s: float,
    ) -> None:
        def place_of(role: str) -> Place:
            return {"client": here, "server": self.places.server}.get(role) or self._host

        def check() -> None:
            if daemon is not None and not daemon.alive():
                raise TunnelError(f"{key}: process exited (code {daemon.returncode()})\n{daemon.log_tail(10)}")

        def timed_out(n: int, probe: Probe) -> Exception:
            tail = daemon.log_tail(10) if daemon else ""
            return TunnelError(f"{key}: probe ready[{n}] ({probe.kind}) never passed in {timeout_s:g} s\n{tail}")

        self.steps.wait(
            plist,
            variables,
            place_of=place_of,
            here=here,
            daemon_of=lambda role: daemon,
            key=f"{key}.ready",
            deadline=time.monotonic() + timeout_s,
            check=check,
            timed_out=timed_out,
            cancel=self._cancel,
        )

    def start_server(self) -> None:
        t0 = time.monotonic()
        rs, place = self.multi.server, self.places.server
        v = self._at(self.vars, place)
        try:
            self.steps.commands(rs.before, v, place, "multi.server.before")
            if rs.daemon:
                self.server = self.steps.spawn(rs, v, place, "server", "server", "multi.server")
            self._wait(rs.ready, v, self.server, place, "multi.server", self.spec.ready_timeout_s)
            self.steps.commands(rs.after, v, place, "multi.server.after")
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
        rs, place = self.multi.client, self.places.client(i)
        v = self._at(self.client_vars[i], place)
        self.steps.commands(rs.before, v, place, f"multi.client[{i}].before")
        self.launched_at[i] = time.monotonic()
        if rs.daemon:
            self.clients[i] = self.steps.spawn(rs, v, place, "clients", f"client{i}", f"multi.client[{i}]")

    def settle(self, i: int, timeout_s: float) -> str | None:
        """Wait for client i's own ready probes, then run its `after` commands. Returns an error or None."""
        rs, place = self.multi.client, self.places.client(i)
        v = self._at(self.client_vars[i], place)
        try:
            self._wait(rs.ready, v, self.clients.get(i), place, f"client {i}", timeout_s)
            self.steps.commands(rs.after, v, place, f"multi.client[{i}].after")
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
        start_lead_s: float | None = None,
    ) -> dict[int, str]:
        """Launch clients (all at once, or `rate_per_s` per second) and settle each on a pool. Returns the
        errors of the clients that failed (index -> message). With `retries`, a client that failed is
        stopped and launched again (that many times) before it counts as failed. All at once on places
        that launch in batches (client hosts): each host's clients in one request, all started at one
        instant `start_lead_s` after the requests go out (None: each host at once), on this machine's clock
        (`started_at`); the `before` commands run ahead of it."""
        errors: dict[int, str] = {}
        pool = ThreadPoolExecutor(SETTLE_POOL)
        indices = list(indices)
        try:
            futures = {}
            batched = rate_per_s <= 0 and self.multi.client.daemon is not None and self.places.batched
            for i, err in self._launch_batch(indices, start_lead_s) if batched else self._paced(indices, rate_per_s):
                if err is not None:
                    errors[i] = err
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

    def _paced(self, indices: list[int], rate_per_s: float) -> Iterator[tuple[int, str | None]]:
        """Launch clients one by one (all at once, or `rate_per_s` per second), yielding each as it is
        launched (its settling starts while the next ones launch) with its error or None."""
        t0 = time.monotonic()
        for n, i in enumerate(indices):
            if rate_per_s > 0 and (wait := t0 + n / rate_per_s - time.monotonic()) > 0:
                time.sleep(wait)
            try:
                self.launch(i)
            except TunbenchError as e:
                yield i, str(e)
                continue
            yield i, None

    def _launch_batch(self, indices: list[int], lead_s: float | None) -> Iterator[tuple[int, str | None]]:
        """Launch `indices` through FleetPlaces.spawn_batch (each machine's in one request, at one instant
        `lead_s` from now), the `before` commands ahead of it; each client with its error or None."""
        rs = self.multi.client
        spawns = {}
        for i in indices:
            place = self.places.client(i)
            v = self._at(self.client_vars[i], place)
            self.steps.commands(rs.before, v, place, f"multi.client[{i}].before")
            argv, env = self.steps.daemon(rs, v, f"multi.client[{i}]")
            spawns[i] = Spawn(place, argv, f"{self.spec.name} client{i}", f"client{i}.log", env, "clients")
        self.started_at = None if lead_s is None else time.monotonic() + lead_s
        for i, r in self.places.spawn_batch(spawns, self.started_at).items():
            self.launched_at[i] = r.at
            if r.proc is not None:
                self.clients[i] = r.proc
            yield i, r.error

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
        """End many clients at once: per machine (this one's namespaces, or a client host's agent in one
        request), every process group SIGTERMed, one shared wait, SIGKILL of what is left."""
        by_machine: dict[str, tuple[Place, list[Proc]]] = {}
        for i in indices:
            if i in self.clients:
                place = self.places.client(i)
                by_machine.setdefault(place.machine, (place, []))[1].append(self.clients.pop(i))
        for place, procs in by_machine.values():
            place.stop(procs)

    def pids(self, role: str) -> list[int]:
        """The role's processes on its place's host (for a remote place, pids there; the clients' of the
        first client machine only: pids of several machines do not mix)."""
        if role == "server":
            return self.places.server.pids("server", [self.server] if self.server else [])
        first = next(iter(self.layout.indices()))
        return self.places.client(first).pids("clients", list(self.clients.values()))

    def rss(self, role: str) -> list[int]:
        """The resident memory of each of the role's processes, read on the host of each (every client
        machine's, in turn)."""
        if role == "server":
            return self.places.server.rss("server", [self.server] if self.server else [])
        out: list[int] = []
        for place, indices in self.machines(self.layout.indices()).values():
            with contextlib.suppress(MachineLost):  # a lost client host's clients are gone (the trial says so)
                out += place.rss("clients", [self.clients[i] for i in indices if i in self.clients])
        return out

    def check_server(self) -> None:
        if self.server is not None and not self.server.alive():
            raise TunnelError(f"{self.ref.label}: server exited (code {self.server.returncode()}){self._server_log()}")

    def client_log_tail(self, i: int, lines: int = 8) -> str:
        d = self.clients.get(i)
        try:
            if d is not None:
                return d.log_tail(lines)
            data = self.places.client(i).read(f"client{i}.log")
        except MachineLost:  # its host is lost: no log to show
            return ""
        if data is None:
            return ""
        return "\n".join(data.decode(errors="replace").splitlines()[-lines:])
