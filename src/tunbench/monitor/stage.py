"""What saturated a side over the measured window (docs/scaling.md): from the sampler's per-thread,
per-process and per-CPU readings (monitor/threads.py), each side's busiest tunnel thread, how busy its CPUs
were and their softirq time, and the first saturated serial stage:

- "thread NAME", when the side was pinned to one CPU: its busiest tunnel thread plus that CPU's busy time
  no known process was charged with (`unclaimed`: the kernel's packet work done there in softirqs while no
  process of the run was current, much of it on the thread's behalf) reached SATURATED of the CPU;
- else "all cores busy": the side's CPUs were busy at least SATURATED of the window, on average (by anything
  that ran there: its tunnel, its traffic generator, the other side where they share, softirqs);
- else "thread NAME": a tunnel thread of the side used at least SATURATED of one core by itself;
- else "softirq CPU N": one of the side's CPUs spent at least SATURATED of the window in softirqs;
- else "none": nothing the side runs on was saturated (the limit is elsewhere: the other side, the
  generator, the link, a window or a queue).

A fleet between hosts (`clients`, `storm` over `--hosts`) is judged the same way per host
(`fleet_saturation`): its server on the server host, and its clients on each client host that took a share
(`stage.client.host.<name>.*` where the clients span several hosts: the ``{on}`` of a figure); a client host
lost mid-trial has no figures, and its params say so rather than showing a zero.

A side's CPUs are those it was placed on (`params.cpuset`: the cores axis or `[run] cpuset`), every CPU
of the host when it was not placed. The figures are % of one core (threads, a CPU's softirq) or of the
side's CPUs (busy). The arithmetic is pure.

unclaimed = max(0, busy - thread - known), where busy is the CPU's non-idle, non-iowait share (/proc/stat)
and known the CPU time of the other processes the run placed on that CPU alone (the side's traffic
generator, its other tunnel processes, the other side or the emulator where they share it). Each tick of a
CPU's time is charged once to one of /proc/stat's columns and once to the task that was current, so the
difference counts nothing twice; a thread plus the CPU's softirq column does, where the kernel charges
softirq time by ticks (without CONFIG_IRQ_TIME_ACCOUNTING the interrupted task is charged with it too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tunbench.host.cgroup import parse_cpu_list
from tunbench.metrics import Metrics, declare
from tunbench.monitor.sampler import RoleCost
from tunbench.monitor.threads import CpuTime, ThreadTime

SATURATED = 0.95
"""The share of a core (a thread, a CPU's softirq) or of a side's CPUs (busy) at which it counts as saturated."""

ROLES = ("client", "server")
TOP_THREADS = 8  # the busiest threads of a side kept in the record's params

BUSIEST_THREAD = declare(
    "stage.{role}.{on}busiest_thread_pct", "%", "none", "info",
    "The busiest thread of a side's tunnel processes over the measured window, in % of one core "
    "(/proc/PID/task/TID/stat: utime + stime).",
)  # fmt: skip
CPUS_BUSY = declare(
    "stage.{role}.{on}cpus_busy_pct", "%", "none", "info",
    "How busy the CPUs a side ran on were over the measured window, in % of all of them (everything but "
    "idle and iowait, whoever ran: the tunnel, the generator, the other side where they share).",
)  # fmt: skip
SOFTIRQ_MAX = declare(
    "stage.{role}.{on}softirq_pct", "%", "none", "info",
    "The most softirq time one of a side's CPUs spent over the measured window, in % of that CPU.",
)  # fmt: skip
CPUS_GIVEN = declare("stage.{role}.{on}cpus", "count", "none", "info", "How many CPUs a side could run on.")
SATURATED_FLAG = declare(
    "stage.{role}.{on}saturated", "flag", "none", "info",
    "1 when a stage of the side was saturated over the window (a pinned side's thread and its CPU's "
    "unclaimed time, all its cores, one thread or one CPU's softirqs at 95% or more), 0 when none was.",
)  # fmt: skip
THREAD_AND_CPU = declare(
    "stage.{role}.{on}thread_softirq_pct", "%", "none", "info",
    "For a side pinned to one CPU: its busiest tunnel thread plus the CPU's busy time that no process the "
    "run knows there was charged with (the kernel's work on that CPU, much of it on the thread's behalf), "
    "over the measured window in % of the CPU; the figure its thread is judged saturated on (docs/scaling.md).",
)  # fmt: skip
UNCLAIMED = declare(
    "stage.{role}.{on}cpu_unclaimed_pct", "%", "none", "info",
    "For a side pinned to one CPU: that CPU's busy time over the measured window that was charged to no "
    "process the run placed there, in % of the CPU: busy - busiest thread - known, at least 0.",
)  # fmt: skip
KNOWN = declare(
    "stage.{role}.{on}cpu_known_pct", "%", "none", "info",
    "For a side pinned to one CPU: the CPU time of the other processes the run placed on that CPU alone "
    "(its traffic generator, its other tunnel processes, the other side or the emulator where they share it), "
    "over the measured window in % of the CPU.",
)  # fmt: skip
SIDE_FIGURES = (BUSIEST_THREAD, CPUS_BUSY, SOFTIRQ_MAX, CPUS_GIVEN, SATURATED_FLAG, THREAD_AND_CPU, UNCLAIMED, KNOWN)
"""A side's figures: each has an ``{on}`` ("" for the side, ``host.<name>.`` for one client host of a fleet)."""
CPU_SOFTIRQ = declare(
    "host_cpu.{cpu}.softirq_pct", "%", "none", "info",
    "Softirq time of one CPU of this host over the measured window, in % of the window.",
)  # fmt: skip
CPU_BUSY = declare(
    "host_cpu.{cpu}.busy_pct", "%", "none", "info",
    "How busy one CPU of this host was over the measured window (everything but idle and iowait), in %.",
)  # fmt: skip


@dataclass(frozen=True)
class ThreadUse:
    """One thread's CPU over the window: its id, name, process and % of one core."""

    tid: int
    comm: str
    pid: int
    pct: float


@dataclass(frozen=True)
class Stage:
    """A side's saturated stage ("all cores busy", "thread NAME", "softirq CPU N" or "none") and the
    figures it was read from."""

    name: str
    cpus: tuple[int, ...]
    busy_pct: float
    busiest: ThreadUse | None
    softirq_pct: float
    pinned: bool = False  # the side had one CPU: its busiest thread is judged with that CPU's unclaimed time
    known_pct: float = 0.0  # on a pinned side: the CPU time of the other processes known on its CPU

    @property
    def saturated(self) -> bool:
        return self.name != "none"

    @property
    def unclaimed_pct(self) -> float | None:
        """The pinned side's CPU's busy time charged to no known process, in % of the CPU (module
        docstring); None when the side was not pinned to one CPU."""
        if not self.pinned or self.busiest is None:
            return None
        return max(0.0, self.busy_pct - self.busiest.pct - self.known_pct)

    @property
    def thread_cpu_pct(self) -> float | None:
        """The busiest thread plus its one CPU's unclaimed time, in % of that CPU (at most 100, as a share
        of one CPU; the thread's own figure may pass it by the sampling's jitter); None when the side was
        not pinned to one CPU."""
        if (unclaimed := self.unclaimed_pct) is None or self.busiest is None:
            return None
        return min(100.0, self.busiest.pct + unclaimed)

    def thread_text(self) -> str:
        """ "socat (thread) 91% + 4% of CPU 1 not charged to any process = 95%: saturated" for a pinned
        side, "" otherwise."""
        both, unclaimed = self.thread_cpu_pct, self.unclaimed_pct
        if both is None or unclaimed is None or self.busiest is None:
            return ""
        verdict = "saturated" if both >= 100.0 * SATURATED else "not saturated"
        return (
            f"{self.busiest.comm} (thread) {self.busiest.pct:.0f}% + {unclaimed:.0f}% of CPU {self.cpus[0]} "
            f"not charged to any process = {both:.0f}%: {verdict}"
        )


def _at(points: Sequence[tuple[float, float]], t: float) -> float:
    return float(np.interp(t, [p[0] for p in points], [p[1] for p in points]))


def thread_use(series: Sequence[tuple[float, Mapping[int, ThreadTime]]], t0: float, t1: float) -> list[ThreadUse]:
    """Each thread's CPU between t0 and t1 (the sampler's clock), in % of one core, busiest first: its
    cumulative time interpolated at each edge between the readings around it; a thread first seen after the
    first reading counts from 0 before it (it was born in between)."""
    if not series or t1 <= t0:
        return []
    first = series[0][1]
    points: dict[int, list[tuple[float, float]]] = {}
    last: dict[int, ThreadTime] = {}
    for t, threads in series:
        for tid, th in threads.items():
            if tid not in points and tid not in first:
                points[tid] = [(series[0][0], 0.0)] if t > series[0][0] else []
            points.setdefault(tid, []).append((t, th.cpu_s))
            last[tid] = th
    out = [
        ThreadUse(tid, last[tid].comm, last[tid].pid, 100.0 * max(0.0, _at(pts, t1) - _at(pts, t0)) / (t1 - t0))
        for tid, pts in points.items()
    ]
    return sorted(out, key=lambda u: (-u.pct, u.tid))


def cpu_use(
    series: Sequence[tuple[float, Mapping[int, CpuTime]]], t0: float, t1: float
) -> dict[int, tuple[float, float]]:
    """Each CPU's (busy %, softirq %) between t0 and t1, interpolated as thread_use does."""
    if not series or t1 <= t0:
        return {}
    out: dict[int, tuple[float, float]] = {}
    for cpu in series[0][1]:
        busy = [(t, c[cpu].busy_s) for t, c in series if cpu in c]
        soft = [(t, c[cpu].softirq_s) for t, c in series if cpu in c]
        span = t1 - t0
        out[cpu] = (
            min(100.0, 100.0 * max(0.0, _at(busy, t1) - _at(busy, t0)) / span),
            min(100.0, 100.0 * max(0.0, _at(soft, t1) - _at(soft, t0)) / span),
        )
    return out


def stage(
    cpus: Sequence[int],
    use: Mapping[int, tuple[float, float]],
    threads: Sequence[ThreadUse],
    others: Mapping[int, float] | None = None,
) -> Stage:
    """The first saturated serial stage of a side on these CPUs (the module docstring's order). `others`:
    pid -> % of one core of every process known on the CPU of a side pinned to one (its own tunnel
    processes among them or not: the busiest thread is taken out of its process, the side's other tunnel
    threads are added where their process is missing)."""
    mine = [c for c in cpus if c in use]
    busy = sum(use[c][0] for c in mine) / len(mine) if mine else 0.0
    soft_cpu = max(mine, key=lambda c: use[c][1], default=None)
    soft = use[soft_cpu][1] if soft_cpu is not None else 0.0
    busiest = threads[0] if threads else None
    pinned = len(mine) == 1
    known = known_pct(threads, others or {}) if pinned else 0.0
    limit = 100.0 * SATURATED
    with_cpu = Stage("", tuple(mine), busy, busiest, soft, pinned, known).thread_cpu_pct
    if busiest is not None and with_cpu is not None and with_cpu >= limit:
        name = f"thread {busiest.comm}"  # on one CPU, more specific than "all cores busy", which it implies
    elif mine and busy >= limit:
        name = "all cores busy"
    elif busiest is not None and busiest.pct >= limit:
        name = f"thread {busiest.comm}"
    elif soft_cpu is not None and soft >= limit:
        name = f"softirq CPU {soft_cpu}"
    else:
        name = "none"
    return Stage(name, tuple(mine), busy, busiest, soft, pinned, known)


def known_pct(threads: Sequence[ThreadUse], others: Mapping[int, float]) -> float:
    """The CPU of everything known on a pinned side's CPU but its busiest thread: the processes in `others`
    (pid -> %), and the side's tunnel threads whose process is not among them; less the busiest thread."""
    if not threads:
        return sum(others.values())
    missing = sum(u.pct for u in threads if u.pid not in others)
    return max(0.0, sum(others.values()) + missing - threads[0].pct)


def placed_on(
    cpu: int,
    cpuset: Mapping[str, str],
    placed: Mapping[str, Sequence[tuple[float, Mapping[int, ThreadTime]]]],
    window: tuple[float, float],
) -> dict[int, float]:
    """pid -> % of one core over the window of every process of the placements that are this one CPU alone
    (a placement of several CPUs does not say how much of its time was spent on this one)."""
    out: dict[int, float] = {}
    for name, series in placed.items():
        if cpuset.get(name) and parse_cpu_list(cpuset[name]) == [cpu]:
            out.update({u.tid: u.pct for u in thread_use(series, *window)})
    return out


def side_cpus(cpuset: Mapping[str, str], role: str, online: Sequence[int]) -> list[int]:
    """The CPUs a side could run on: its placement's, else every CPU the host has."""
    text = cpuset.get(role, "")
    return parse_cpu_list(text) if text else list(online)


def saturation(
    threads: Mapping[str, Sequence[tuple[float, Mapping[int, ThreadTime]]]],
    cpus: Sequence[tuple[float, Mapping[int, CpuTime]]],
    window: tuple[float, float],
    cpuset: Mapping[str, str],
    *,
    placed: Mapping[str, Sequence[tuple[float, Mapping[int, ThreadTime]]]] | None = None,
) -> tuple[Metrics, dict[str, object]]:
    """The figures of each side over `window` (the sampler's clock) as metrics, and as params: each side's
    stage name, its busiest threads ([name, tid, % of one core]) and, for a side pinned to one CPU, the
    thread + unclaimed figure in words (Stage.thread_text). `placed`: each placement's processes per tick
    (Sampler.placed; cpuset names their CPUs). ({}, {}) without CPU readings."""
    use = cpu_use(cpus, *window)
    if not use:
        return {}, {}
    m: Metrics = {}
    for cpu, (busy, soft) in sorted(use.items()):
        m[CPU_BUSY.key(cpu=cpu)] = busy
        m[CPU_SOFTIRQ.key(cpu=cpu)] = soft
    stages: dict[str, str] = {}
    details: dict[str, str] = {}
    tops: dict[str, list[list[object]]] = {}
    for role in ROLES:
        if role not in threads:
            continue
        used = thread_use(threads[role], *window)
        mine = [c for c in side_cpus(cpuset, role, sorted(use)) if c in use]
        others = placed_on(mine[0], cpuset, placed or {}, window) if len(mine) == 1 else None
        st = stage(mine, use, used, others)
        m[CPUS_GIVEN.key(role=role)] = len(st.cpus)
        m[CPUS_BUSY.key(role=role)] = st.busy_pct
        m[SOFTIRQ_MAX.key(role=role)] = st.softirq_pct
        m[BUSIEST_THREAD.key(role=role)] = st.busiest.pct if st.busiest is not None else None
        m[SATURATED_FLAG.key(role=role)] = 1.0 if st.saturated else 0.0
        if (both := st.thread_cpu_pct) is not None:
            m[THREAD_AND_CPU.key(role=role)] = both
            m[UNCLAIMED.key(role=role)] = st.unclaimed_pct
            m[KNOWN.key(role=role)] = st.known_pct
            details[role] = st.thread_text()
        stages[role] = st.name
        tops[role] = [[u.comm, u.tid, round(u.pct, 1)] for u in used[:TOP_THREADS]]
    said: dict[str, object] = {"stage": stages, "threads": tops}
    if details:
        said["stage_detail"] = details  # a pinned side's thread + unclaimed time, both parts named
    return m, said


def saturation_on_hosts(
    sides: Mapping[str, RoleCost], window: tuple[float, float], cpuset: Mapping[str, str]
) -> tuple[Metrics, dict[str, object]]:
    """`saturation` for sides each read on a host of its own (`--hosts`: the agent's sampler gave each side's
    threads, its host's CPUs and its placements' processes per tick, RoleCost.cpus, .placed, .placed_cpus,
    already on this machine's clock): each side judged against its own host's CPUs (`cpuset`: each side's CPUs
    there, none when unplaced). The same metrics per side; each host's CPUs go to the params
    (`host_cpus`: side -> CPU -> [busy %, softirq %]), since `host_cpu.<n>.*` would name two hosts' CPU n
    alike. ({}, {}) when no side has CPU readings."""
    m: Metrics = {}
    said: dict[str, dict[str, object]] = {}
    for role, cost in sorted(sides.items()):
        if not cost.cpus:
            continue
        names = {f"{role}.{name}": cpus for name, cpus in cost.placed_cpus.items()}
        placed = {f"{role}.{name}": series for name, series in cost.placed.items()}
        figures, got = saturation(
            {role: cost.threads}, cost.cpus, window, {**names, role: cpuset.get(role, "")}, placed=placed
        )
        cpus: dict[str, list[float | None]] = {}
        for key, value in figures.items():
            for spec, at in ((CPU_BUSY, 0), (CPU_SOFTIRQ, 1)):
                if spec.matches(key):
                    cpus.setdefault(spec.values(key)["cpu"], [None, None])[at] = value
                    break
            else:
                m[key] = value
        said.setdefault("host_cpus", {})[role] = cpus
        merge_said(said, got)
    return m, dict(said)


def merge_said(said: dict[str, dict[str, object]], got: Mapping[str, object]) -> None:
    """A side's params (`stage`, `threads`, `host_cpus`: role -> value) added into the trial's."""
    for name, part in got.items():
        if isinstance(part, Mapping):
            said.setdefault(name, {}).update(part)


def on_host(key: str, host: str) -> str:
    """A side's figure (`stage.client.cpus_busy_pct`) as one host's (`stage.client.host.h2.cpus_busy_pct`);
    ValueError for a key that is not a side's figure."""
    for spec in SIDE_FIGURES:
        if spec.matches(key) and not (values := spec.values(key)).get("on"):
            return spec.key(**{**values, "on": ".".join(("host", host, ""))})  # {on}: host.<name>.
    raise ValueError(f"not a side's stage figure: {key}")


def not_read(host: str, lost: str | None) -> str:
    """What a client host's stage says when it has no readings, never a stage: lost mid-trial (`lost`: why),
    or its agent gave none over the phase."""
    if lost is None:
        return f"not read: {host}'s agent gave no readings over the phase"
    return f"not read: {host} was lost ({(lost.splitlines() or ['lost'])[0]})"


def side_text(names: Mapping[str, str], unread: Mapping[str, str | None]) -> str:
    """A side spread over hosts in words: each host whose stage saturated with it ("all cores busy on h3; thread
    wireguard-go on h4"), else "none"; the hosts without readings said after it ("(no stage: h4 lost)")."""
    hit = [f"{name} on {host}" for host, name in names.items() if name != "none"]
    text = "; ".join(hit) if hit else "none"
    if unread:
        said = ", ".join(f"{h} {'not read' if why is None else 'lost'}" for h, why in sorted(unread.items()))
        text += f" (no stage: {said})"
    return text


def fleet_saturation(
    server: RoleCost | None,
    server_host: str,
    clients: Mapping[str, RoleCost],
    hosts: Sequence[str],
    lost: Mapping[str, str],
    window: tuple[float, float],
) -> tuple[Metrics, dict[str, object]]:
    """The stage of a fleet whose roles ran on hosts (`--hosts`), over `window` (the controller's phase clock):
    the server side as `saturation_on_hosts` judges it on its host (`server_host`, named in
    `stage_hosts.server`); the client side on each client host in
    `hosts` (those with a share, in the inventory's order) from that host's readings in `clients` (host ->
    its clients' RoleCost, with threads and CPUs). With one client host its figures are `stage.client.*`;
    with several each host's are `stage.client.host.<name>.*`, `stage.client.saturated` says whether any
    host's stage saturated (left out when a host has no readings and none of the others saturated: unknown),
    and the params hold each host's stage (`stage_hosts.client.<name>`), threads and CPUs. A host in `lost`
    (host -> why) or without readings has no figures: its stage says why (`not_read`), never a zero."""
    m: Metrics = {}
    said: dict[str, dict[str, object]] = {}
    if server is not None and server.cpus:
        figures, got = saturation_on_hosts({"server": server}, window, {})
        m.update(figures)
        merge_said(said, got)
        if (server_stage := said.get("stage", {}).get("server")) is not None:
            said.setdefault("stage_hosts", {})["server"] = {server_host: server_stage}
    judged: dict[str, tuple[Metrics, dict[str, object]]] = {}
    for host in hosts:
        if host in clients and host not in lost:
            figures, got = saturation_on_hosts({"client": clients[host]}, window, {})
            if got.get("stage"):  # readings of its CPUs over the window (host_cpus alone can be an empty one)
                judged[host] = figures, got
    missing = {h: lost.get(h) for h in hosts if h not in judged}  # host -> why it was lost, None: not lost
    if not hosts:
        return m, dict(said)
    if len(hosts) == 1:
        (host,) = hosts
        if host in judged:
            figures, got = judged[host]
            m.update(figures)
            merge_said(said, got)
        else:
            said.setdefault("stage", {})["client"] = not_read(host, missing[host])
        said.setdefault("stage_hosts", {})["client"] = {host: said["stage"]["client"]}
        return m, dict(said)
    names: dict[str, str] = {}
    per_host: dict[str, dict[str, object]] = {}
    for host in hosts:
        if host not in judged:
            per_host.setdefault("stage_hosts", {})[host] = not_read(host, missing[host])
            continue
        figures, got = judged[host]
        m.update({on_host(k, host): v for k, v in figures.items()})
        for name, part in got.items():  # stage -> stage_hosts, threads -> threads_hosts, host_cpus as it is
            if isinstance(part, Mapping) and "client" in part:
                per_host.setdefault(name if name == "host_cpus" else f"{name}_hosts", {})[host] = part["client"]
        names[host] = str(per_host["stage_hosts"][host])
    hit = any(name != "none" for name in names.values())
    if hit or not missing:
        m[SATURATED_FLAG.key(role="client")] = 1.0 if hit else 0.0
    said.setdefault("stage", {})["client"] = side_text(names, missing)
    for name, part in per_host.items():
        said.setdefault(name, {})["client"] = dict(sorted(part.items(), key=lambda kv: hosts.index(kv[0])))
    return m, dict(said)
