"""A role placed on a remote host: the Place protocol (host/place.py) answered by that host's agent, and
the role's cost sampled there and mapped onto the controller's clock."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tunbench.errors import TunbenchError
from tunbench.host.cgroup import CpuUsage
from tunbench.host.place import Completed, Proc, Spawn, Started, completed
from tunbench.monitor.sampler import RoleCost, RoleSample
from tunbench.monitor.threads import CpuTime, ThreadTime
from tunbench.remote.connection import AgentConnection
from tunbench.remote.protocol import HostLost


class RemoteProc:
    def __init__(self, conn: AgentConnection, key: str, pid: int, what: str) -> None:
        self._conn = conn
        self.key = key
        self._pid = pid
        self.what = what
        self.stopped = False

    @property
    def pid(self) -> int:
        return self._pid

    def _state(self, lines: int = 0) -> dict[str, Any]:
        return dict(self._conn.call("proc_state", proc=self.key, lines=lines))

    def alive(self) -> bool:
        return bool(self._state()["alive"])

    def returncode(self) -> int | None:
        rc = self._state()["returncode"]
        return None if rc is None else int(rc)

    def log_tail(self, lines: int = 20) -> str:
        return str(self._state(lines)["log"])

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            with contextlib.suppress(HostLost):  # a lost agent ends its processes on its own (EOF)
                self._conn.call("proc_stop", proc=self.key)


class RemotePlace:
    """One role's place on a host: its namespace there (None: the host's own) and trial directory."""

    def __init__(self, conn: AgentConnection, key: str, workdir: str, netns: str | None) -> None:
        self.conn = conn
        self.key = key
        self.workdir = Path(workdir)
        self.netns = netns
        self.label = f"host {conn.name}" + (f", namespace {netns}" if netns else "")
        self.machine = conn.name

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
        r = self.conn.call(
            "run",
            wait_s=timeout_s + 30.0,
            place=self.key,
            argv=list(argv),
            stdin=stdin,
            timeout_s=timeout_s,
            check=check,
            what=what,
            env=dict(env) if env else None,
        )
        return completed(argv, int(r["returncode"]), r["stdout"], r["stderr"])

    def spawn(
        self, argv: Sequence[str], *, what: str, log_name: str, env: Mapping[str, str] | None = None, role: str = ""
    ) -> RemoteProc:
        r = self.conn.call(
            "spawn", place=self.key, argv=list(argv), what=what, log_name=log_name, env=dict(env or {}), role=role
        )
        return RemoteProc(self.conn, str(r["proc"]), int(r["pid"]), what)

    def spawn_many(
        self, spawns: Sequence[Spawn], places: Sequence[RemotePlace], start_mono: float | None, wait_s: float
    ) -> list[Started]:
        """Many daemons of this place's host in one request, each at its place of `places` (places of the same
        host): the agent starts them one after another from `start_mono` (this machine's monotonic clock,
        mapped onto the host's; None: at once). Their start times come back on this machine's clock."""
        clock = self.conn.clock
        assert clock is not None
        if any(pl.conn is not self.conn for pl in places):
            raise ValueError("a batch of spawns is for places of one host")
        start = None if start_mono is None else clock.to_host_mono(start_mono)
        wire = [
            {"place": pl.key, "argv": list(sp.argv), "what": sp.what, "log_name": sp.log_name,
             "env": dict(sp.env), "role": sp.role}
            for sp, pl in zip(spawns, places, strict=True)
        ]  # fmt: skip
        got = self.conn.call("spawn_many", wait_s=wait_s, spawns=wire, start_mono=start)
        out = []
        for sp, r in zip(spawns, got, strict=True):
            proc = None if "error" in r else RemoteProc(self.conn, str(r["proc"]), int(r["pid"]), sp.what)
            out.append(Started(proc, clock.to_local_mono(float(r["at"])), r.get("error")))
        return out

    def port_open(self, port: int, proto: str = "tcp") -> bool:
        return bool(self.conn.call("port_open", place=self.key, port=port, proto=proto))

    def listening(self, proto: str = "tcp") -> set[int]:
        return {int(p) for p in self.conn.call("listening", place=self.key, proto=proto)}

    def exists(self, path: str) -> bool:
        return bool(self.conn.call("exists", place=self.key, path=path))

    def put_files(self, files: Mapping[str, tuple[bytes, int]]) -> None:
        enc = {k: [base64.b64encode(data).decode(), mode] for k, (data, mode) in files.items()}
        self.conn.call("put_files", place=self.key, files=enc)

    def read(self, rel: str) -> bytes | None:
        r = self.conn.call("read", place=self.key, rel=rel)
        return None if r is None else base64.b64decode(r)

    def pids(self, role: str, procs: Sequence[Proc]) -> list[int]:
        keys = [p.key for p in procs if isinstance(p, RemoteProc)]
        return [int(p) for p in self.conn.call("pids", place=self.key, role=role, procs=keys)]

    def rss(self, role: str, procs: Sequence[Proc]) -> list[int]:
        keys = [p.key for p in procs if isinstance(p, RemoteProc)]
        return [int(b) for b in self.conn.call("rss", place=self.key, role=role, procs=keys)]

    def stop(self, procs: Sequence[Proc]) -> None:
        """One request: the agent stops them all at once there (its stop_daemons)."""
        if not all(isinstance(p, RemoteProc) for p in procs):
            raise TypeError("a remote place stops its own daemons only")
        mine = [p for p in procs if isinstance(p, RemoteProc) and not p.stopped]
        for p in mine:
            p.stopped = True
        if mine:
            with contextlib.suppress(HostLost):  # a lost agent ends its processes on its own (EOF)
                self.conn.call("procs_stop", wait_s=60.0, procs=[p.key for p in mine])

    def wait_exits(self, procs: Sequence[Proc], timeout_s: float) -> list[float | None]:
        """The agent waits there; its exit times come back on this machine's monotonic clock."""
        keys = [p.key for p in procs if isinstance(p, RemoteProc)]
        if len(keys) != len(procs):
            raise TypeError("a remote place waits for its own daemons only")
        ended = self.conn.call("wait_exits", wait_s=timeout_s + 30.0, place=self.key, procs=keys, timeout_s=timeout_s)
        assert self.conn.clock is not None
        return [None if t is None else self.conn.clock.to_local_mono(float(t)) for t in ended]

    # ---- cost ---------------------------------------------------------------------------------------
    def sample_start(
        self, role: str, procs: Sequence[Proc], *, cgroup_only: bool = False, threads: bool = False
    ) -> str:
        """`threads`: also the role's threads, the host's CPUs and the place's placements (the saturated stage)."""
        keys = [p.key for p in procs if isinstance(p, RemoteProc)]
        r = self.conn.call(
            "sample_start", place=self.key, role=role, procs=keys, cgroup_only=cgroup_only, threads=threads
        )
        return str(r["sampler"])

    def sample_abandon(self, sampler: str) -> None:
        """Stop a sampler whose result is not wanted (the measurement failed); a lost host stopped it already."""
        with contextlib.suppress(TunbenchError):
            self.conn.call("sample_stop", sampler=sampler)

    def sample_stop(self, sampler: str, local_t0: float) -> RoleCost:
        """The role's cost, its series moved onto the controller's sampler clock (origin `local_t0`, a
        time.monotonic() here) with the measured clock offset."""
        r = self.conn.call("sample_stop", sampler=sampler)
        assert self.conn.clock is not None
        shift = self.conn.clock.to_local_mono(float(r["t0"])) - local_t0
        (cost,) = (role_cost(c, shift) for c in r["results"].values())
        return cost


def role_cost(d: Mapping[str, Any], shift_s: float) -> RoleCost:
    """A RoleCost from its JSON form (dataclasses.asdict), sample times shifted by `shift_s`: its threads,
    its host's CPUs and its placements' processes too, where the agent read them (`sample_start(threads=)`)."""
    cg = d.get("cgroup_cpu")
    return RoleCost(
        cpu=CpuUsage(**d["cpu"]),
        rss_peak_bytes=int(d["rss_peak_bytes"]),
        processes=int(d["processes"]),
        cgroup_cpu=CpuUsage(**cg) if cg else None,
        series=[RoleSample(**{**s, "t_s": float(s["t_s"]) + shift_s}) for s in d.get("series", [])],
        threads=_ticks(d.get("threads", []), shift_s),
        cpus=[(float(t) + shift_s, {int(n): CpuTime(**c) for n, c in cpus.items()}) for t, cpus in d.get("cpus", [])],
        placed={str(name): _ticks(series, shift_s) for name, series in (d.get("placed") or {}).items()},
        placed_cpus={str(k): str(v) for k, v in (d.get("placed_cpus") or {}).items()},
    )


def _ticks(series: Sequence[Any], shift_s: float) -> list[tuple[float, dict[int, ThreadTime]]]:
    """(t, id -> ThreadTime) per tick from JSON ([t, {"id": {...}}]; ids are strings there), shifted."""
    return [(float(t) + shift_s, {int(k): ThreadTime(**v) for k, v in got.items()}) for t, got in series]
