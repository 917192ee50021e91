"""`tunbench agent`: the remote end of a multi-host run, started by the controller over `ssh`.

It reads one JSON request per line on stdin and writes one JSON answer per line on stdout (protocol.py);
there is no port of its own and it is silent unless asked. Every request is answered with the same host/
owners a local run uses: a `LocalPlace` per role (a namespace, or this host's own), the role's cgroup, the
Daemon process groups, the sampler, all under one run scope and ledger. When stdin closes (the controller
ended, was killed, or its SSH connection dropped), everything the agent started is torn down and it exits.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path, PurePosixPath
from typing import IO, Any

import psutil

from tunbench.errors import TunbenchError
from tunbench.host.cgroup import CpuCap, RoleCgroup, cpuset_refusal, cpuset_root, online_cpus
from tunbench.host.ledger import Ledger, LinkRecord
from tunbench.host.netns import prefixed_links, remove_prefixed_links
from tunbench.host.place import LocalPlace
from tunbench.host.proc import Daemon, kill_running, stop_daemons, tree_pids
from tunbench.host.ready import ReadyProbe
from tunbench.host.scope import run_scope
from tunbench.host.workdir import workdir
from tunbench.link.emulator import LinkEmulator, profile_link_builder
from tunbench.link.profile import Profile
from tunbench.monitor import callgrind, pmu, work
from tunbench.monitor.counters import parse_dev
from tunbench.monitor.sampler import Sampler
from tunbench.remote import facts, hostwatch
from tunbench.remote.clients import ClientNamespaces
from tunbench.remote.egress import EgressLink
from tunbench.remote.protocol import build_id, error_answer
from tunbench.topology.build import Topology, TopologySpec

# the agent's role samplers tick at 10 Hz: their edges are not aligned to the controller's window
REMOTE_INTERVAL_S = 0.1

RUNTIME_DIRS = (PurePosixPath("/run"), PurePosixPath("/var/run"))


def confined(workdir: Path, rel: str) -> Path:
    """`rel` as a path inside the trial's directory `workdir`, or a TunbenchError: the agent runs as root,
    so a file request never reaches outside it (not by an absolute path, a `..`, or a symlink that leads
    out). The controller checks too; the agent does not rely on it."""
    parts = PurePosixPath(rel)
    if not rel or parts.is_absolute() or ".." in parts.parts:
        raise TunbenchError(f"{rel!r}: a file request must name a path inside the trial's directory")
    full = workdir / parts
    if not full.resolve().is_relative_to(workdir.resolve()):
        raise TunbenchError(f"{rel!r} leads out of the trial's directory")
    return full


def runtime_path(path: str) -> PurePosixPath:
    """An absolute path a file probe may ask about: under /run (or /var/run), without `..`."""
    p = PurePosixPath(path)
    if ".." in p.parts or not any(p.is_relative_to(d) and p != d for d in RUNTIME_DIRS):
        raise TunbenchError(
            f"{path!r}: a file probe on a remote host looks in the trial's directory or under /run only"
        )
    return p


# requests answered side by side (they read state or run a command in a place, and change nothing the others
# read), CONCURRENT_POOL at once; the teardown ends the commands still running (host.proc.kill_running)
CONCURRENT = frozenset({"run", "exists", "proc_state", "port_open", "listening", "read", "pids", "rss"})
CONCURRENT_POOL = 16
WATCHES_KEPT = 4  # open window watches (op_watch_start): one per window, so a few at most are live


class _PlaceState:
    def __init__(self, place: LocalPlace, stack: contextlib.ExitStack, tag: str = "") -> None:
        self.place = place
        self.stack = stack
        self.tag = tag  # the group it was opened in (op_close_tag)
        self.procs: set[str] = set()  # the daemons started at this place, stopped when it closes
        # the side's placements on this host's CPUs ("tunnel", "generator", "link"), with the CPUs each holds
        self.placements: dict[str, tuple[RoleCgroup, str]] = {}


class Agent:
    def __init__(self, ledger: Ledger, stack: contextlib.ExitStack) -> None:
        self.ledger = ledger
        self.stack = stack
        self.places: dict[str, _PlaceState] = {}
        self.procs: dict[str, Daemon] = {}
        self.samplers: dict[str, Sampler] = {}
        self.sampled_cpus: dict[str, dict[str, str]] = {}  # a thread sampler's placements' CPUs, by sampler
        self.links: dict[str, LinkEmulator] = {}  # a pair's emulator, by its client place
        self.probes: dict[str, ReadyProbe] = {}
        self.counts: dict[str, work.Counting] = {}  # counted work in progress (op_count_open)
        self._count_cap: work.Capability | None = None  # what perf may count here, probed once
        self._callgrind: callgrind.Callgrind | None = None  # valgrind's programs here, found once
        self._instr_cap: work.Capability | None = None  # whether perf counts instructions:u here, probed once
        # counted instructions in progress (op_instr_on): the window, its place, the tunnel device, its bytes then
        self.instr: dict[str, tuple[callgrind.RoleWindow | pmu.PmuWindow, LocalPlace, str, dict[str, float]]] = {}
        self.caps: dict[str, tuple[CpuCap, str]] = {}  # CPU caps (op_cap_open) and their places
        self.watches: dict[str, hostwatch.Watch] = {}  # measured windows being watched (op_watch_start)
        self._own: tuple[list[int], tuple[str, int, str, int] | None] | None = None  # ancestors, control socket
        self._n = 0

    # ---- requests ---------------------------------------------------------------------------------
    def handle(self, op: str, args: dict[str, Any]) -> Any:
        fn: Callable[..., Any] | None = getattr(self, f"op_{op}", None)
        if fn is None:
            raise TunbenchError(f"unknown request {op!r} (is the agent the same version?)")
        return fn(**args)

    def op_hello(self) -> dict[str, Any]:
        from tunbench import __version__

        return {
            "version": __version__,
            "build": build_id(),
            "pid": os.getpid(),
            "prefix": self.ledger.prefix,
        }

    def op_edge(self, exclude: list[str]) -> dict[str, Any]:
        """One edge of a measured window on this host: the other tunbench runs live here (ledgers whose owner
        lives, other than this agent's and those in `exclude`: the controller's) and the agent's own CPU."""
        from tunbench.monitor.interference import live_runs

        t = psutil.Process().cpu_times()
        runs = sorted(live_runs({self.ledger.prefix, *exclude}))
        return {"runs": runs, "cpu_s": float(t.user + t.system), "mono": time.monotonic()}

    def op_watch_start(self, at: float, exclude: list[str], address: str | None = None) -> str:
        """Watch a measured window on this host (remote/hostwatch.py) from `at` (this host's monotonic clock):
        answered at once, the start edge read by a thread that sleeps until `at`. `exclude`: the run's other
        prefixes (the controller's); `address`: the host's underlay address, whose device's counters are read
        too (None: none)."""
        if self._own is None:
            up = hostwatch.ancestors()
            self._own = (up, hostwatch.control_socket(up))
        up, sock = self._own
        w = hostwatch.Watch({self.ledger.prefix, *exclude}, float(at), scope=hostwatch.host_scope(), also_own=up)
        if address:
            w.device = hostwatch.device_of(address)
            w.sock = sock
            w.control_device = hostwatch.device_of(sock[0]) if sock else None
        w.open()
        key = self._id("v")
        self.watches[key] = w
        while len(self.watches) > WATCHES_KEPT:  # windows whose trial failed before their end was asked for
            self.watches.pop(next(iter(self.watches)))
        return key

    def op_watch_stop(self, watch: str, at: float) -> dict[str, Any]:
        """The window's figures on this host (hostwatch.figures), its end edge read at `at`."""
        w = self.watches.pop(watch, None)
        if w is None:
            raise TunbenchError(f"no watch {watch} on this host")
        return w.close(float(at))

    def op_clock(self) -> dict[str, float]:
        return {"mono": time.monotonic(), "wall": time.time()}

    def op_facts(self, address: str | None = None) -> dict[str, Any]:
        return facts.host_facts(address)

    def op_tools(self, programs: list[str]) -> dict[str, bool]:
        return facts.tools(programs)

    def op_capabilities(self) -> dict[str, Any]:
        return facts.capabilities()

    def op_cpus(self) -> dict[str, Any]:
        """The CPUs this host may place roles on (host.cgroup.online_cpus: the cpuset root's, else this
        process's affinity), where its cpusets go ("v1 at /sys/fs/cgroup/cpuset", "" for none) and why it
        cannot place any ("" when it can), for the cores axis on hosts."""
        found = cpuset_root()
        root = f"{found[0]} at {found[1]}" if found is not None else ""
        return {"cpus": online_cpus(), "root": root, "refusal": cpuset_refusal()}

    def _placed(
        self, stack: contextlib.ExitStack, name: str, roles: list[str], cpus: dict[str, str] | None
    ) -> tuple[dict[str, RoleCgroup], list[Path], RoleCgroup | None, dict[str, tuple[RoleCgroup, str]]]:
        """The roles' cgroups, with `cpus` (the cores axis on hosts, sites/hosts_cores.py: "tunnel",
        "generator", "link" CPU lists) each role confined to the tunnel's CPUs, and a placement of its own for
        the side's other processes (the generator) and for the emulator: made as a local run makes them
        (host/cgroup.py RoleCgroup), removed when the place closes. Returns the cgroups, the cgroup.procs files
        the generator joins, the emulator's placement (None without one), and each placement with the CPUs
        its cpuset.cpus holds, read back from the kernel ({} unplaced)."""
        cpus = cpus or {}
        cgroups = {
            r: stack.enter_context(RoleCgroup(f"{name}-{r}", self.ledger, cpus=cpus.get("tunnel", ""))) for r in roles
        }
        if not cpus:
            return cgroups, [], None, {}
        gen = stack.enter_context(RoleCgroup(f"{name}-gen", self.ledger, cpus=cpus["generator"], account=False))
        link = None
        if cpus.get("link"):
            link = stack.enter_context(RoleCgroup(f"{name}-emu", self.ledger, cpus=cpus["link"], account=False))
        placed = {"tunnel": cgroups[roles[0]], "generator": gen, **({"link": link} if link else {})}
        return cgroups, gen.placement_files, link, {k: (cg, _cpuset_of(cg)) for k, cg in placed.items()}

    def op_check_addresses(self, server: str, addresses: list[str], what: str, key: str) -> str:
        """ "" when every address is usable here (free, on the network of the NIC that routes to `server`),
        else why not (for `doctor --hosts`)."""
        from tunbench.errors import ConfigError
        from tunbench.remote.egress import check_free_addresses, route_to

        try:
            nic, _ = route_to(server)
            check_free_addresses(addresses, nic, what, key)
        except ConfigError as e:
            return str(e)
        return ""

    def op_place_open(
        self, tag: str, netns: str | None, roles: list[str], link_prefix: str, cpus: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """A role's place in a namespace that is not ours (None: this host's own). The run's links there (a
        tunnel's devices, named with the controller's run prefix `link_prefix`) are recorded in this agent's
        ledger before any can exist, so `tunbench clean` removes them should this agent be killed, and go
        when the place closes. `cpus`: the side's placement on this host's CPUs (_placed)."""
        stack = contextlib.ExitStack()
        try:
            stack.callback(self._remove_links, self.ledger.add_links(link_prefix, netns))
            wd = stack.enter_context(workdir(self.ledger, tag))
            cgroups, generator, _, placed = self._placed(stack, f"{self.ledger.prefix}-{tag}", roles, cpus)
        except BaseException:
            stack.close()
            raise
        pid = self._id("p")
        place = LocalPlace(netns, self.ledger, wd, cgroups, placement=generator)
        self.places[pid] = _PlaceState(place, stack)
        self.places[pid].placements = placed
        return {"place": pid, "workdir": str(wd), **({"cpus": _cpus_of(placed)} if placed else {})}

    def op_pair_open(self, tag: str, spec: dict[str, Any], profile: dict[str, Any] | None, seed: int) -> dict[str, Any]:
        """Both roles on this host: a client and a server namespace joined by a veth, or by the WAN emulator
        for an emulated profile (the same Topology a local run builds), each a place with its role's cgroup.
        The pair goes when its client place is closed."""
        stack = contextlib.ExitStack()
        try:
            wd = stack.enter_context(workdir(self.ledger, tag))
            builder = profile_link_builder(Profile(**profile), self.ledger, wd, seed) if profile else None
            topo = stack.enter_context(Topology(self.ledger, tag, TopologySpec(**spec), link_builder=builder))
            cgroups = {
                r: stack.enter_context(RoleCgroup(f"{self.ledger.prefix}-{tag}-{r}", self.ledger))
                for r in ("client", "server")
            }
        except BaseException:
            stack.close()
            raise
        out: dict[str, Any] = {"workdir": str(wd), "addr": asdict(topo.addr), "sysctls": topo.sysctls_applied}
        for role in ("server", "client"):
            key = self._id("p")
            place = LocalPlace(topo.ns_name(role), self.ledger, wd, cgroups)
            # the client's entry owns the pair; the server's closes only its own processes
            self.places[key] = _PlaceState(place, stack if role == "client" else contextlib.ExitStack())
            out[role] = {"place": key, "netns": topo.ns_name(role)}
        emulator = topo.link if isinstance(topo.link, LinkEmulator) else None
        if emulator is not None:
            self.links[out["client"]["place"]] = emulator
        return out

    def op_egress_open(
        self,
        tag: str,
        spec: dict[str, Any],
        profile: dict[str, Any],
        seed: int,
        address: str,
        server: str,
        link_prefix: str,
        cpus: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """The client role of a two-host run with an emulated profile: a namespace of its own whose way to the
        server crosses tunbench-link (remote/egress.py), with the client role's cgroup. It goes when the place
        is closed. `cpus`: the side's placement on this host's CPUs, the emulator's too (_placed)."""
        stack = contextlib.ExitStack()
        try:
            wd = stack.enter_context(workdir(self.ledger, tag))
            # the placement outlives the emulator: entered first
            cgroups, generator, link, placed = self._placed(stack, f"{self.ledger.prefix}-{tag}", ["client"], cpus)
            egress = stack.enter_context(
                EgressLink(
                    self.ledger,
                    tag,
                    link_prefix,
                    TopologySpec(**spec),
                    Profile(**profile),
                    seed,
                    wd,
                    address=address,
                    server=server,
                )
            )
            if link is not None and egress.emulator is not None and egress.emulator.pid:
                link.join(egress.emulator.pid)
        except BaseException:
            stack.close()
            raise
        key = self._id("p")
        place = LocalPlace(egress.netns, self.ledger, wd, cgroups, placement=generator)
        self.places[key] = _PlaceState(place, stack)
        self.places[key].placements = placed
        if egress.emulator is not None:
            self.links[key] = egress.emulator
        return {
            "place": key,
            "workdir": str(wd),
            "netns": egress.netns,
            "sysctls": egress.sysctls_applied,
            "egress": egress.device,
            **({"cpus": _cpus_of(placed)} if placed else {}),
        }

    def op_clients_open(
        self, tag: str, link_prefix: str, addresses: list[str], server: str, sysctls: dict[str, str]
    ) -> dict[str, Any]:
        """The clients of a `clients` trial between two hosts (remote/clients.py): a namespace per address,
        one trial directory and one `clients` cgroup for all; a place per client. The first client's place
        owns them all: close it last."""
        stack = contextlib.ExitStack()
        try:
            wd = stack.enter_context(workdir(self.ledger, tag))
            cn = stack.enter_context(ClientNamespaces(self.ledger, tag, link_prefix, addresses, server, sysctls))
            cgroups = {"clients": stack.enter_context(RoleCgroup(f"{self.ledger.prefix}-{tag}-clients", self.ledger))}
        except BaseException:
            stack.close()
            raise
        places = []
        for k, ns in enumerate(cn.netns):
            key = self._id("p")
            owner = stack if k == 0 else contextlib.ExitStack()
            self.places[key] = _PlaceState(LocalPlace(ns, self.ledger, wd, cgroups), owner, tag)
            places.append(key)
        return {
            "places": places,
            "netns": cn.netns,
            "workdir": str(wd),
            "sysctls": cn.sysctls_applied,
            "device": cn.device,
            "setup_s": cn.setup_s,
        }

    def op_close_tag(self, tag: str) -> int:
        """Close every place opened under `tag`, newest first (a request the controller gave up on, e.g. at
        a timeout, still opened them: nothing of it may hold the client addresses for the next trial)."""
        keys = [k for k, st in self.places.items() if st.tag == tag]
        for key in reversed(keys):
            self.op_place_close(key)
        return len(keys)

    def op_probe_open(self, namespaces: dict[str, str], address: str, interval_s: float) -> str:
        """Readiness through the tunnels (host/ready.py) from this host's client namespaces."""
        probe = ReadyProbe({int(k): v for k, v in namespaces.items()}, address, interval_s)
        probe.__enter__()
        key = self._id("r")
        self.probes[key] = probe
        return key

    def op_probe_watch(self, probe: str, keys: list[int]) -> None:
        self.probes[probe].watch(keys)

    def op_probe_wait(self, probe: str, keys: list[int], timeout_s: float) -> dict[str, float]:
        """Wait until every key answered or `timeout_s` passed; the first answer of each (this host's
        monotonic clock), by key."""
        p = self.probes[probe]
        p.wait(keys, time.monotonic() + timeout_s)
        return {str(k): t for k, t in p.ready_at.items()}

    def op_probe_close(self, probe: str) -> None:
        p = self.probes.pop(probe, None)
        if p is not None:
            p.__exit__(None, None, None)

    def op_place_close(self, place: str) -> dict[str, Any]:
        st = self.places.pop(place, None)
        if st is None:
            return {"link": None}
        for key in st.procs & self.procs.keys():
            self.procs.pop(key).stop()
        st.stack.close()
        emulator = self.links.pop(place, None)
        return {"link": emulator.stats if emulator is not None else None}

    def op_run(self, place: str, argv: list[str], stdin: str | None, timeout_s: float, check: bool, what: str,
               env: dict[str, str] | None) -> dict[str, Any]:  # fmt: skip
        res = self._place(place).run(argv, stdin=stdin, timeout_s=timeout_s, check=check, what=what, env=env)
        return {"returncode": res.returncode, "stdout": res.stdout, "stderr": res.stderr}

    def op_spawn(self, place: str, argv: list[str], what: str, log_name: str, env: dict[str, str] | None,
                 role: str) -> dict[str, Any]:  # fmt: skip
        d = self._place(place).spawn(argv, what=what, log_name=log_name, env=env, role=role)
        key = self._id("d")
        self.places[place].procs.add(key)
        self.procs[key] = d
        return {"proc": key, "pid": d.pid}

    def op_spawn_many(self, spawns: list[dict[str, Any]], start_mono: float | None = None) -> list[dict[str, Any]]:
        """Many daemons in one request (a storm's clients on this host), at this host's own launch pace: from
        `start_mono` (this host's monotonic clock; None: now), one after another. Per spawn: its proc key, pid
        and the monotonic time it was started, or its error (a failed spawn does not stop the others)."""
        if start_mono is not None and (wait := float(start_mono) - time.monotonic()) > 0:
            time.sleep(wait)
        out: list[dict[str, Any]] = []
        for sp in spawns:
            at = time.monotonic()
            try:
                r = self.op_spawn(sp["place"], sp["argv"], sp["what"], sp["log_name"], sp.get("env"), sp["role"])
            except TunbenchError as e:
                out.append({"error": str(e), "at": at})
                continue
            out.append({**r, "at": at})
        return out

    def op_proc_state(self, proc: str, lines: int = 0) -> dict[str, Any]:
        d = self.procs[proc]
        return {"alive": d.alive(), "returncode": d.returncode(), "log": d.log_tail(lines) if lines else ""}

    def op_proc_stop(self, proc: str) -> None:
        d = self.procs.pop(proc, None)
        if d is not None:
            d.stop()

    def op_procs_stop(self, procs: list[str]) -> None:
        """Stop many daemons at once (a fleet's clients on this host): one SIGTERM each, one shared wait."""
        stop_daemons([d for d in (self.procs.pop(k, None) for k in procs) if d is not None])

    def op_port_open(self, place: str, port: int, proto: str) -> bool:
        return self._place(place).port_open(port, proto)

    def op_listening(self, place: str, proto: str) -> list[int]:
        return sorted(self._place(place).listening(proto))

    def op_rss(self, place: str, role: str, procs: list[str]) -> list[int]:
        return self._place(place).rss(role, [self.procs[p] for p in procs if p in self.procs])

    def op_wait_exits(self, place: str, procs: list[str], timeout_s: float) -> list[float | None]:
        """Each daemon's exit time (this host's monotonic clock), None for one still running at the timeout."""
        return self._place(place).wait_exits([self.procs[p] for p in procs], timeout_s)

    def op_exists(self, place: str, path: str) -> bool:
        """A file probe: a path in the trial's directory, or an absolute one under /run (a daemon's socket,
        such as WireGuard's UAPI socket); nothing else on this host is answered."""
        pl = self._place(place)
        if PurePosixPath(path).is_absolute():
            return Path(runtime_path(path)).exists()
        return confined(pl.workdir, path).exists()

    def op_put_files(self, place: str, files: dict[str, list[Any]]) -> None:
        pl = self._place(place)
        for rel in files:
            confined(pl.workdir, rel)  # every one checked before any is written
        pl.put_files({k: (base64.b64decode(v[0]), int(v[1])) for k, v in files.items()})

    def op_read(self, place: str, rel: str) -> str | None:
        pl = self._place(place)
        data = pl.read(str(confined(pl.workdir, rel).relative_to(pl.workdir)))
        return None if data is None else base64.b64encode(data).decode()

    def op_pids(self, place: str, role: str, procs: list[str]) -> list[int]:
        return self._place(place).pids(role, [self.procs[p] for p in procs if p in self.procs])

    def op_sample_start(
        self, place: str, role: str, procs: list[str], cgroup_only: bool = False, threads: bool = False
    ) -> dict[str, Any]:
        """A role's sampler at a place; role "link" samples the emulator that place's trial runs (a pair's,
        or the client's egress: its process, as a local run samples its own). `cgroup_only`: the role's
        cgroup totals, no process sampled (hundreds of clients at 10 Hz would perturb the host). `threads`:
        also each of the role's threads, each CPU of this host and each of the place's placements' processes
        at every tick, for the saturated stage (monitor/stage.py), as a local run's sampler reads them; with
        `cgroup_only`, the threads of every process in the role's cgroup at the first and last tick only (a
        fleet's clients on this host, judged over the whole phase) and the CPUs at every tick."""
        pl = self._place(place)
        daemons = [self.procs[p] for p in procs if p in self.procs]
        emulator = self.links.get(place)
        if role == "link":
            if emulator is None or not emulator.pid:
                raise TunbenchError(f"no emulator runs at place {place}")
            link_pid = emulator.pid
            sampler = Sampler({role: (lambda: [link_pid], None)}, interval_s=REMOTE_INTERVAL_S)
        elif cgroup_only:
            cg = pl.cgroups.get(role)
            sampler = Sampler(
                {role: (lambda: [], cg)},
                interval_s=REMOTE_INTERVAL_S,
                threads=threads,
                edge_threads={role: cg.pids if cg is not None else list} if threads else None,
            )
        else:
            placements = self.places[place].placements if threads else {}
            sampler = Sampler(
                {role: (lambda: pl.pids(role, daemons), pl.cgroups.get(role))},
                interval_s=REMOTE_INTERVAL_S,
                threads=threads,
                placed={name: cg.placed_pids for name, (cg, _) in placements.items()},
            )
        sampler.__enter__()
        key = self._id("s")
        self.samplers[key] = sampler
        if threads:
            self.sampled_cpus[key] = _cpus_of(self.places[place].placements)
        self.stack.callback(self._stop_sampler, key)
        return {"sampler": key, "t0": sampler.t0}

    def op_sample_stop(self, sampler: str) -> dict[str, Any]:
        """The role's cost; with `threads`, its host's CPUs and the placements' processes (and the CPUs each
        holds) beside its threads."""
        s = self._stop_sampler(sampler)
        if s is None:
            raise TunbenchError(f"no sampler {sampler}")
        placed_cpus = self.sampled_cpus.pop(sampler, {})
        for cost in s.results.values():
            cost.cpus, cost.placed, cost.placed_cpus = s.cpus, s.placed, placed_cpus
        return {"t0": s.t0, "wall_s": s.wall_s, "results": {r: asdict(c) for r, c in s.results.items()}}

    def _count_capability(self) -> work.Capability:
        if self._count_cap is None:
            self._count_cap = work.probe(shutil.which("perf"))
        return self._count_cap

    def op_count_capability(self) -> dict[str, Any]:
        """What perf may count on this host (`doctor --hosts`): why not and the fix, or the events."""
        return asdict(self._count_capability())

    def op_count_open(self, place: str, role: str, procs: list[str]) -> dict[str, Any]:
        """Counted work (monitor/work.py) for a role's processes at a place: perf stat attached with its
        counters disabled, the same argv and parser as a local run. {"count": key}, or {"count": None, "why":
        ...} where this host cannot count (perf missing or not permitted, probed once) or the role has no
        process here."""
        pl = self._place(place)
        cap = self._count_capability()
        if not cap.available:
            return {"count": None, "why": cap.why}
        pids = pl.pids(role, [self.procs[p] for p in procs if p in self.procs])
        if not pids:
            return {"count": None, "why": work.NO_PROCESS}
        key = self._id("w")
        self.counts[key] = work.Counting(cap, role, pids, pl.workdir, self.ledger)
        return {"count": key, "why": ""}

    def op_count_start(self, count: str) -> str:
        """Enable the counters (acknowledged by perf); "" or why it did not start."""
        c = self.counts[count]
        c.start()
        return c.why

    def op_count_stop(self, count: str) -> dict[str, Any]:
        """Disable and stop perf: the role's `work.<role>.*` metrics, or why there are none."""
        c = self.counts.pop(count)
        metrics = c.finish()
        return {"metrics": metrics, "why": c.why}

    def _pmu(self) -> work.Capability:
        if self._instr_cap is None:
            self._instr_cap = pmu.probe_perf(shutil.which("perf"))
        return self._instr_cap

    def op_instr_capability(self) -> dict[str, Any]:
        """Whether this host's perf counts `instructions:u` (its PMU; monitor/pmu.py): {"why": ""} where it
        does, else perf's reason; `run` and `doctor --hosts` choose the counter from it."""
        cap = self._pmu()
        return {"perf": cap.perf, "why": cap.why}

    def op_instr_on(
        self, place: str, role: str, procs: list[str], device: str, counter: str = "callgrind"
    ) -> dict[str, Any]:
        """Counted instructions of a role at a place, switched on now, and the bytes of the role's tunnel device
        `device` read. `counter` "callgrind": its daemon, started under this host's callgrind
        (monitor/callgrind.py); "perf": the role's processes, running natively, by perf stat's `instructions:u`
        (monitor/pmu.py). {"count": key}, or {"count": None, "why": ...} where this host cannot count (valgrind
        missing, perf refused: no PMU) or it did not switch on."""
        if counter == "perf":
            return self._pmu_on(place, role, procs, device)
        if self._callgrind is None:
            self._callgrind = callgrind.find()
        if why := self._callgrind.why_not:
            return {"count": None, "why": why}
        pl = self._place(place)
        daemons = [self.procs[p] for p in procs if p in self.procs]
        if not daemons:
            return {"count": None, "why": "not counted: the role's daemon is not running here"}
        window = callgrind.RoleWindow(self._callgrind, pl.workdir, role, daemons[0].pid)
        before = _device_bytes(pl, device)
        if why := window.on():
            return {"count": None, "why": why}
        key = self._id("i")
        self.instr[key] = (window, pl, device, before)
        return {"count": key, "why": ""}

    def _pmu_on(self, place: str, role: str, procs: list[str], device: str) -> dict[str, Any]:
        cap = self._pmu()
        if cap.why:
            return {"count": None, "why": f"not counted: {cap.why}"}
        pl = self._place(place)
        pids = pl.pids(role, [self.procs[p] for p in procs if p in self.procs])
        if not pids:
            return {"count": None, "why": f"not counted: {work.NO_PROCESS}"}
        before = _device_bytes(pl, device)
        window = pmu.PmuWindow(cap, role, pids, pl.workdir, self.ledger)
        if window.why:
            window.read()  # stops its perf
            return {"count": None, "why": window.why}
        key = self._id("i")
        self.instr[key] = (window, pl, device, before)
        return {"count": key, "why": ""}

    def op_instr_read(self, count: str) -> dict[str, Any]:
        """Switch it off, dump, read and split the count (Go's runtime named from the binary here), and the
        bytes the tunnel device handled since `instr_on` (both ways; {} where it has no counters)."""
        window, pl, device, before = self.instr.pop(count)
        after = _device_bytes(pl, device)
        got = window.read()
        moved = {f: after[f] - before[f] for f in before if f in after} if before and after else {}
        return {**asdict(got), "device_bytes": moved}

    def op_clean(self) -> dict[str, Any]:
        """What killed runs left on this host (this agent's own run is alive, so it is left alone)."""
        from tunbench.host.clean import clean

        return asdict(clean())

    # ---- CPU caps (remote/cap.py) -------------------------------------------------------------------
    def op_cap_open(self, place: str, period_us: int = 100_000) -> str:
        """A CPU cap (host/cgroup.py CpuCap: a cgroup-v1 `cpu` group and its CFS quota) for processes of
        `place`; it is removed at cap_close, or when the place closes (which the agent's end of input does):
        whatever is still in it then is killed, as a local cap does. Uncapped until cap_limit."""
        st = self.places.get(place)
        if st is None:
            raise TunbenchError(f"no place {place} on this host (closed already?)")
        key = self._id("c")
        cap = CpuCap(f"{self.ledger.prefix}-{key}-cap", self.ledger, period_us)
        try:
            cap.__enter__()
        except BaseException as e:
            cap.__exit__(type(e), e, e.__traceback__)  # its directory, if made before the failure
            raise
        self.caps[key] = (cap, place)
        st.stack.callback(self.op_cap_close, key)
        return key

    def op_cap_add(self, cap: str, pids: list[int]) -> None:
        """Put processes of the cap's place under the cap: each must be one of the place's (its roles'
        cgroups' members, or its daemons' process trees), never another process of this host."""
        c, place = self._cap(cap)
        st = self.places[place]
        daemons = [self.procs[k] for k in st.procs if k in self.procs]
        mine = set(tree_pids([d.pid for d in daemons]))
        for cg in st.place.cgroups.values():
            mine.update(cg.pids())
        if stray := [p for p in pids if p not in mine]:
            raise TunbenchError(
                f"pid(s) {', '.join(map(str, stray))} are not processes of place {place} ({st.place.label})"
            )
        c.add(pids)

    def op_cap_limit(self, cap: str, pct: float | None) -> None:
        """The cap's quota in % of one core (None: no limit)."""
        self._cap(cap)[0].limit(pct)

    def op_cap_close(self, cap: str) -> None:
        c = self.caps.pop(cap, None)
        if c is not None:
            c[0].__exit__(None, None, None)

    def _cap(self, key: str) -> tuple[CpuCap, str]:
        try:
            return self.caps[key]
        except KeyError:
            raise TunbenchError(f"no CPU cap {key} on this host (closed already?)") from None

    # ---- helpers ----------------------------------------------------------------------------------
    def _remove_links(self, rec: LinkRecord) -> None:
        remove_prefixed_links(rec.netns, rec.prefix)
        left = prefixed_links(rec.netns, rec.prefix)
        if left:  # the record stays for `tunbench clean`
            raise TunbenchError(f"could not remove the run's links {', '.join(left)} (`tunbench clean` retries)")
        self.ledger.drop_links(rec)

    def _stop_sampler(self, key: str) -> Sampler | None:
        s = self.samplers.pop(key, None)
        if s is not None:
            s.__exit__(None, None, None)
        return s

    def _place(self, key: str) -> LocalPlace:
        try:
            return self.places[key].place
        except KeyError:
            raise TunbenchError(f"no place {key} on this host (closed already?)") from None

    def _id(self, kind: str) -> str:
        self._n += 1
        return f"{kind}{self._n}"

    def close(self) -> None:
        kill_running()  # a command answered on the pool (an iperf3 client) must not outlive the teardown
        for key in list(self.counts):
            self.counts.pop(key).finish()
        for window, *_ in self.instr.values():
            if isinstance(window, pmu.PmuWindow):  # its perf stat stops now; callgrind's stop with their daemons
                with contextlib.suppress(Exception):
                    window.read()
        self.instr.clear()
        for key in list(self.probes):
            self.op_probe_close(key)
        for key in list(self.procs):
            self.procs.pop(key).stop()
        for key in reversed(list(self.places)):  # newest first: a clients group's owner (its first place) last
            self.op_place_close(key)


def _device_bytes(place: LocalPlace, device: str) -> dict[str, float]:
    """The bytes a device of the place's namespace received and sent (/proc/net/dev), {} when it is not there."""
    res = place.run(["cat", "/proc/net/dev"], check=False, timeout_s=5, what="the tunnel device's counters")
    got = parse_dev(res.stdout).get(device)
    return {f: float(got[f]) for f in ("rx_bytes", "tx_bytes") if f in got} if got else {}


def _cpus_of(placed: dict[str, tuple[RoleCgroup, str]]) -> dict[str, str]:
    return {name: cpus for name, (_, cpus) in placed.items()}


def _cpuset_of(cg: RoleCgroup) -> str:
    """The CPUs a placement's cpuset holds, as the kernel reads them back ("" when it has none)."""
    if cg.cpuset_path is None:
        return ""
    try:
        return (cg.cpuset_path / "cpuset.cpus").read_text().strip()
    except OSError:
        return ""


def serve(inp: IO[str], out: IO[str], on_eof_while_busy: Callable[[], None] | None = None) -> None:
    """Answer requests until stdin closes; then tear down everything and return. Input is read by a thread
    of its own, so an end of input is seen at once even while a request runs (a 20 s iperf3 client): then
    `on_eof_while_busy` is called (main() makes it a SIGTERM to itself, which ends the request and tears
    down as an end of input between requests does)."""

    if os.geteuid() != 0:
        for line in _lines(inp):
            req_id = json.loads(line).get("id") if line.lstrip().startswith("{") else None
            why = (
                f"tunbench agent runs as uid {os.geteuid()} there and needs root (namespaces, cgroups, tunnel "
                "devices): connect as root (ansible_user=root), or set tunbench_command='sudo -n tunbench' "
                "with passwordless sudo for it"
            )
            out.write(json.dumps(error_answer(req_id, TunbenchError(why))) + "\n")
            out.flush()
            return
        return
    with run_scope() as ledger, contextlib.ExitStack() as stack:
        agent = Agent(ledger, stack)
        stack.callback(agent.close)
        busy = threading.Event()
        lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            for ln in _lines(inp):
                lines.put(ln)
            lines.put(None)
            if busy.is_set() and on_eof_while_busy is not None:
                on_eof_while_busy()

        threading.Thread(target=read, name="tunbench-agent-input", daemon=True).start()
        write_lock = threading.Lock()
        running = Running(busy)

        def answer(req: dict[str, Any]) -> None:
            try:
                a = {"id": req.get("id"), "ok": True, "result": agent.handle(req["op"], req.get("args") or {})}
            except Exception as e:  # every failure goes back to the controller, which decides
                a = error_answer(req.get("id"), e)
            finally:
                running.done()
            with write_lock:
                out.write(json.dumps(a) + "\n")
                out.flush()

        # requests that only read or run a command in a place (a fleet's readiness probes and `after`
        # commands, many clients at once) are answered on a pool, so a host's clients settle side by side;
        # every other request is answered in turn, in the order it came
        pool = ThreadPoolExecutor(CONCURRENT_POOL, thread_name_prefix="tunbench-agent")
        stack.callback(pool.shutdown, wait=False, cancel_futures=True)  # the teardown does not wait for them
        while (text := lines.get()) is not None:
            try:
                req = json.loads(text)
            except json.JSONDecodeError as e:
                with write_lock:
                    out.write(json.dumps(error_answer(None, TunbenchError(f"not a JSON request: {e}"))) + "\n")
                    out.flush()
                continue
            running.start()
            if req.get("op") in CONCURRENT:
                pool.submit(answer, req)
            else:
                answer(req)


class Running:
    """How many requests are being answered; `busy` is set while any is."""

    def __init__(self, busy: threading.Event) -> None:
        self._busy = busy
        self._n = 0
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            self._n += 1
            self._busy.set()

    def done(self) -> None:
        with self._lock:
            self._n -= 1
            if self._n == 0:
                self._busy.clear()


def _lines(inp: IO[str]) -> Iterator[str]:
    while True:
        line = inp.readline()
        if not line:
            return
        if line.strip():
            yield line


def main() -> int:
    main_pid = os.getpid()
    hit = {"once": False}

    def _term(signum: int, frame: object) -> None:  # SIGTERM or a hung-up terminal: tear down as on EOF
        if os.getpid() != main_pid:
            # a forked helper (pyroute2 forks to create a namespace, and stops it with SIGTERM) must die,
            # never unwind our stack: that would run this agent's teardown in the child
            os._exit(128 + signum)
        if hit["once"]:
            return  # teardown is running: let it finish
        hit["once"] = True
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGHUP, _term)
    # our stdout is the protocol: anything a library prints goes to stderr instead
    proto_out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        serve(sys.stdin, proto_out, on_eof_while_busy=lambda: os.kill(os.getpid(), signal.SIGTERM))
    except SystemExit as e:
        return int(e.code or 0)
    return 0
