"""Workload `clients` (the OpenVPN MP-1..4 procedure): N clients connect, then each pushes traffic through
its own tunnel (UDP at a fixed per-client rate, then TCP), all over one synchronized window.

One iperf3 server per client (distinct ports) at the server's place; every iperf3 client is launched at
once and runs long enough to cover the launch spread; each client's receiver-side per-second intervals are
placed on the trial's clock (its launch time + the interval's offset) and only the interval where all N
were active (after a warm-up) counts: no head/tail effect (late starters getting more bandwidth).
Reported: aggregate and per-client throughput (distribution, Jain fairness), server CPU and RSS over
time, and per-client cost (server CPU-seconds and RSS bytes per connected client).

Every process runs at its role's place (host/place.py): namespaces of this machine, or the server host and
the client host's namespaces of a run between two hosts (sites/hosts_fleet.py); the same steps either way.
"""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel

from tunbench.errors import MachineLost, TrialError
from tunbench.host.place import Place, Proc
from tunbench.metrics import core
from tunbench.monitor.cost import cost_metrics, cumulative_cpu
from tunbench.monitor.hostload import cpu_shares, cpu_times
from tunbench.results import TrialRecord
from tunbench.sites.base import PER_CLIENT_SETUP_S, FleetSetup, SampledCost
from tunbench.stats import percentile
from tunbench.stats.fairness import jain_index
from tunbench.units import Window, fmt, mbit
from tunbench.workloads import fleet_metrics as FM
from tunbench.workloads import iperf3
from tunbench.workloads import spans as W
from tunbench.workloads.base import (
    TRIAL_SETUP_S,
    CaseAxes,
    Column,
    FleetContext,
    FleetWorkload,
    Measurement,
    Scaling,
)
from tunbench.workloads.fleet_options import ClientsOptions
from tunbench.workloads.per_host import by_host, lost_indices, without

PORT_BASE = 20000  # client i's iperf3 server listens on PORT_BASE + i in the server namespace
NONLINEAR_WARN_RATIO = 1.5  # per-client cost at the largest N over the smallest N above this: a warning


@dataclass(frozen=True)
class Timing:
    """One traffic phase's clock: when each iperf3 client was launched and exited (seconds since the
    phase began), the warm-up trimmed after the last start, the window's length, the launch slack."""

    launched: dict[int, float]
    ended: dict[int, float]
    warmup_s: float
    duration_s: float
    pad_s: float


def _report(proto: str, i: int) -> str:
    """Client i's iperf3 JSON report, in its place's trial directory."""
    return f"iperf-{proto}-c{i}.json"


def wait_exits(mt: FleetSetup, procs: dict[int, Proc], timeout_s: float) -> dict[int, float | None]:
    """When each client's process exited (this machine's clock; None: still running at the timeout), waited
    for on each client machine at once."""
    groups = list(mt.fleet.machines(procs).values())

    def one(group: tuple[Place, list[int]]) -> dict[int, float | None]:
        place, indices = group
        try:
            return dict(zip(indices, place.wait_exits([procs[i] for i in indices], timeout_s), strict=True))
        except MachineLost:  # that client host's share is lost (trial/fleet.py marks it)
            return dict.fromkeys(indices)

    with ThreadPoolExecutor(max(1, len(groups))) as pool:
        return {i: t for part in pool.map(one, groups) for i, t in part.items()}


def launch_pace(launched_at: dict[int, float]) -> float:
    """Seconds per start, from when each of a fleet's clients was started (0 for fewer than two)."""
    if len(launched_at) < 2:
        return 0.0
    return (max(launched_at.values()) - min(launched_at.values())) / (len(launched_at) - 1)


def phase_pad_s(n: int, per_launch_s: float = 0.0) -> float:
    """Extra run time of each client's traffic beyond warm-up + window: covers the launch spread, so every
    client is still sending when the last one's window ends. Per client 20 ms (a local process starts in
    5-20 ms), or 1.5 x `per_launch_s` where that is more (between hosts each start is a request to the
    client host's agent: the pace measured when the tunnel clients started)."""
    return 1.0 + max(0.02, 1.5 * per_launch_s) * n


class ClientsWorkload(FleetWorkload[ClientsOptions]):
    kind = "clients"
    description = "N clients through one tunnel server, synchronized window (MP-style): throughput, fairness, cost"
    axes: ClassVar[tuple[str, ...]] = ("clients", "direction")
    Options: ClassVar[type[BaseModel]] = ClientsOptions
    layers: ClassVar[tuple[str, ...]] = ("l3",)
    fleet_on_hosts: ClassVar[bool] = True  # sites/hosts_fleet.py places it between two hosts
    one_way: ClassVar[bool] = True
    columns: ClassVar[tuple[Column, ...]] = (
        Column("UDP Mb/s", FM.whole(FM.AGGREGATE, proto="udp"), "mbit"),
        Column("per client", FM.whole(FM.PER_CLIENT, proto="udp", stat="p50"), "mbit"),
        Column("loss", FM.whole(FM.LOSS_PCT, proto="udp"), "pct"),
        Column("TCP Mb/s", FM.whole(FM.AGGREGATE, proto="tcp"), "mbit"),
        Column("Jain", FM.whole(FM.PROTO_JAIN, proto="tcp"), "ratio"),
        Column("CPU-s/cl", FM.PROTO_CPU_PER_CLIENT.key(proto="udp"), "sec"),
        Column("RSS/cl", FM.SERVER_RSS_PER_CLIENT.name, "kb"),
        Column("failed", "|".join(FM.whole(FM.FAILED, proto=p) for p in ("udp", "tcp")), "n"),
    )
    scaling: ClassVar[tuple[Scaling, ...]] = (
        Scaling(
            FM.whole(FM.AGGREGATE, proto="udp"),
            1e6,
            "udp",
            "Aggregate UDP throughput of all clients",
            "aggregate UDP (Mbit/s)",
            ".3g",
        ),
        Scaling(
            FM.whole(FM.AGGREGATE, proto="tcp"),
            1e6,
            "tcp",
            "Aggregate TCP throughput of all clients",
            "aggregate TCP (Mbit/s)",
            ".3g",
        ),
        Scaling(
            FM.PROTO_SERVER_CPU_PCT.key(proto="udp"),
            1.0,
            "cpu",
            "Tunnel server CPU during the UDP phase",
            "server CPU (% of one core)",
            ".1f",
        ),
        W.RSS_PER_CLIENT,
        Scaling(
            FM.PROTO_CPU_PER_CLIENT.key(proto="udp"),
            1.0,
            "cpu-per-client",
            "Tunnel server CPU time per client during the UDP phase",
            "server CPU per client (CPU-seconds)",
            ".3g",
        ),
    )
    caption: ClassVar[str] = (
        "N clients, each through its own tunnel, over the window where all are active; per client: UDP median; "
        "Jain: TCP fairness; CPU-s/cl, RSS/cl: the tunnel server's cost per client; failed: UDP / TCP"
    )

    def headline(self, rec: TrialRecord) -> str:
        m = rec.metrics
        return (
            f"{rec.clients} clients · UDP {mbit(m.get(FM.whole(FM.AGGREGATE, proto='udp')))} Mbit/s"
            f" (loss {fmt(m.get(FM.whole(FM.LOSS_PCT, proto='udp')), 'pct')})"
            f" · TCP {mbit(m.get(FM.whole(FM.AGGREGATE, proto='tcp')))} Mbit/s"
        )

    def sweeps(self, options: BaseModel) -> tuple[list[int], list[str]]:
        return list(self.opts(options).clients), [""]

    def __init__(self) -> None:
        # per-client cost seen so far in this run, per (label, profile, direction, protocol): {N: cost}
        self._costs: dict[tuple[str, ...], dict[int, dict[str, float]]] = {}

    def estimate(self, case: CaseAxes, options: BaseModel, window: Window) -> float:
        o = self.opts(options)
        warmup = o.warmup_s if o.warmup_s is not None else max(window.omit_s, 1.0)
        phase = warmup + window.duration_s + phase_pad_s(case.clients)
        return TRIAL_SETUP_S + case.clients * PER_CLIENT_SETUP_S + len(o.protocols) * phase

    def measure(self, ctx: FleetContext) -> Measurement:
        opts = self.opts(ctx.options)
        n = ctx.clients
        direction = ctx.direction if ctx.direction in ("up", "down") else "up"
        rec = Measurement()
        mt = ctx.env
        lay = mt.layout
        assert mt.probe is not None
        base_rss = sum(mt.fleet.rss("server"))
        t0 = time.monotonic()
        mt.probe.watch(lay.indices())
        errors = mt.fleet.up(lay.indices(), timeout_s=opts.ready_timeout_s, retries=1)
        # a client host lost meanwhile loses its share (trial/fleet.py marks it): the others are measured
        gone = lost_indices(mt.host_of(), mt.lost_clients())
        errors = without(errors, gone)
        if errors:
            raise TrialError(f"{len(errors)} of {n} clients failed to come up:\n{mt.failures_text(errors)}")
        kept = [i for i in lay.indices() if i not in gone]
        if not kept:
            raise TrialError("every client host was lost")
        if not mt.probe.wait(kept, t0 + opts.ready_timeout_s):
            late = len(kept) - len(without(mt.probe.ready_at, gone))
            raise TrialError(f"{late} of {len(kept)} tunnels passed no traffic within {opts.ready_timeout_s:g} s")
        ready_at = without(mt.probe.ready_at, gone)
        rec.metrics[FM.whole(FM.READY_S)] = max(ready_at.values()) - t0
        if host_of := mt.host_of():  # each client host's last client ready
            for host, ready in by_host(host_of, ready_at).items():
                rec.metrics[FM.READY_S.key(on=FM.on(host))] = max(ready.values()) - t0
        rec.metrics[FM.CONNECTED.name] = float(len(kept))
        conn_rss = sum(mt.fleet.rss("server"))
        client_rss = mt.fleet.rss("clients")
        rec.metrics[FM.SERVER_RSS_BASE.name] = float(base_rss)
        rec.metrics[FM.SERVER_RSS_CONNECTED.name] = float(conn_rss)
        rec.metrics[FM.SERVER_RSS_PER_CLIENT.name] = (conn_rss - base_rss) / len(kept)
        rec.metrics[FM.CLIENT_RSS_MEAN.name] = sum(client_rss) / len(client_rss) if client_rss else None
        for k, proto in enumerate(opts.protocols):
            self._phase(ctx, rec, opts, proto, direction, headline=k == 0)
        mt.fleet.check_server()
        self._growth(ctx, rec, opts, direction)
        return rec

    # ---- one traffic phase -------------------------------------------------------------------------
    def _phase(
        self,
        ctx: FleetContext,
        rec: Measurement,
        opts: ClientsOptions,
        proto: str,
        direction: str,
        *,
        headline: bool,
    ) -> None:
        mt = ctx.env
        lay, n = mt.layout, mt.layout.clients
        warmup = opts.warmup_s if opts.warmup_s is not None else max(ctx.window.omit_s, 1.0)
        places = mt.fleet.places
        server_place = places.server
        with contextlib.ExitStack() as stack:
            servers = []
            for i in lay.indices():
                proc = server_place.spawn(
                    iperf3.server_argv(PORT_BASE + i, json=True),
                    what=f"iperf3 server {i}",
                    log_name=f"iperf-{proto}-s{i}.out",
                )
                stack.callback(proc.stop)
                servers.append(proc)
            # between hosts each start is a request to the client host's agent: the pace its tunnel clients
            # were started at sizes the pad (locally the fixed 20 ms per client, as it always was)
            pad = phase_pad_s(n, 0.0 if mt.local else launch_pace(mt.fleet.launched_at))
            run_s = warmup + ctx.window.duration_s + pad
            self._wait_listening(server_place, {PORT_BASE + i for i in lay.indices()}, servers)
            busy0 = cpu_times() if mt.local else None
            phase = "" if headline else FM.PHASE_MONITORED.prefix(proto=proto)
            with mt.counters(rec.metrics, phase), mt.sampling() as sampler:
                s0 = time.monotonic()
                launched: dict[int, float] = {}
                clients: dict[int, Proc] = {}
                gone = lost_indices(mt.host_of(), mt.lost_clients())
                for i in lay.indices():
                    if i in gone:
                        continue
                    place = places.client(i)
                    argv = iperf3.client_argv(
                        lay.inner_server,
                        PORT_BASE + i,
                        iperf3.Iperf3Params(
                            direction="down" if direction == "down" else "up",
                            duration_s=run_s,
                            omit_s=0,
                            connect_timeout_ms=10000,
                            protocol="udp" if proto == "udp" else "tcp",
                            rate_bps=opts.udp_rate_bps,
                            length=opts.udp_len_bytes,
                            interval_s=1,
                            server_output=True,
                            logfile=str(place.workdir / _report(proto, i)),
                        ),
                    )
                    launched[i] = time.monotonic() - s0
                    try:
                        clients[i] = place.spawn(argv, what=f"iperf3 client {i}", log_name=f"iperf-{proto}-c{i}.out")
                    except MachineLost:  # its host was lost just now: its share goes (trial/fleet.py marks it)
                        launched.pop(i)
                        continue
                    stack.callback(clients[i].stop)
                # a client still running well after its end is hung (e.g. its control connection starved
                # by an overloaded tunnel): it is stopped when the stack closes and counts as failed
                timeout = max(0.0, s0 + run_s + 15.0 + 0.05 * n - time.monotonic())
                exits = wait_exits(mt, clients, timeout)
                # the exit anchors the client's intervals
                ended = {i: t - s0 for i, t in exits.items() if t is not None}
        if busy0 is not None:
            host_pct = cpu_shares(busy0, cpu_times()).get("busy_pct", 0.0)
            rec.metrics[FM.HOST_CPU.key(proto=proto)] = host_pct  # all CPUs of the host, in %
            rec.metrics[FM.HOST_SATURATED.key(proto=proto)] = 1.0 if host_pct > 90.0 else 0.0
        timing = Timing(launched, ended, warmup, ctx.window.duration_s, pad)
        self._summarize(mt, rec, opts, proto, direction, timing, sampler, headline)

    @staticmethod
    def _wait_listening(place: Place, ports: set[int], servers: list[Proc], timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        polls = 0
        while not ports <= place.listening("tcp"):
            polls += 1
            # whether one exited: every 0.5 s (a remote place answers each check with a request)
            dead = [s for s in servers if not s.alive()] if polls % 25 == 0 else []
            if dead:
                raise TrialError(f"{dead[0].what} exited: {dead[0].log_tail(5)}")
            if time.monotonic() > deadline:
                raise TrialError(f"iperf3 servers not listening after {timeout_s:g} s")
            time.sleep(0.02)

    def _summarize(
        self,
        mt: FleetSetup,
        rec: Measurement,
        opts: ClientsOptions,
        proto: str,
        direction: str,
        timing: Timing,
        sampler: SampledCost,
        headline: bool,
    ) -> None:
        gone = lost_indices(mt.host_of(), mt.lost_clients())  # a lost client host's clients are not counted
        n = mt.layout.clients - len(gone)
        receiver = "client" if direction == "down" else "server"
        intervals: dict[int, list[W.Interval]] = {}
        failed: list[str] = []
        failed_at: set[int] = set()
        starts: dict[int, float] = {}
        for i, launched in without(timing.launched, gone).items():
            try:
                data = mt.fleet.places.client(i).read(_report(proto, i))
            except MachineLost:  # its host went after this phase's check: its share is lost
                continue
            why = None
            if data is None:
                why = f"no report {_report(proto, i)}"
            else:
                try:
                    ivs, _ = W.iperf3_intervals(data.decode(errors="replace"), receiver=receiver, offset_s=0.0)
                except TrialError as e:
                    why = str(e)
                else:
                    why = None if ivs else "no intervals"
            if why is not None:
                failed.append(f"client {i}: {why}")
                failed_at.add(i)
                continue
            starts[i] = W.anchor(launched, timing.ended.get(i), ivs[-1].end_s)
            intervals[i] = W.shift(ivs, starts[i])
        gone = lost_indices(mt.host_of(), mt.lost_clients())  # a host lost while its reports were read, too
        n = mt.layout.clients - len(gone)
        starts, intervals = without(starts, gone), without(intervals, gone)
        kept, late = W.split_late(starts, timing.pad_s)
        failed += [f"client {i}: its test began {starts[i] - min(starts.values()):.1f} s after the first" for i in late]
        failed_at |= set(late)
        intervals = {i: intervals[i] for i in kept}
        if len(failed) * 2 > n:
            raise TrialError(f"{proto}: {len(failed)} of {n} iperf3 clients failed: " + "; ".join(failed[:3]))
        # a few clients whose iperf3 failed (an overloaded tunnel loses their set-up packets or starves their
        # control connection) are counted, reported and left out; more than half fail the trial
        rec.metrics[FM.whole(FM.FAILED, proto=proto)] = float(len(failed))
        if failed:
            rec.artifacts[f"iperf3-{proto}-failures.txt"] = "\n".join(failed).encode()
        rec.metrics[FM.START_SPREAD.key(proto=proto)] = max(starts[i] for i in kept) - min(starts[i] for i in kept)
        spans = {i: (ivs[0].start_s, ivs[-1].end_s) for i, ivs in intervals.items()}
        win = W.common_window(spans, warmup_s=timing.warmup_s, max_s=timing.duration_s)
        # a client whose iperf3 failed or started late got nothing in the window: it counts as a client that
        # received 0, so the distribution, Jain's index and the per-client costs share one denominator, N
        per_client = {i: 0.0 for i in without(timing.launched, gone)}
        per_client.update({i: 8 * W.bytes_in(ivs, win) / win.length_s for i, ivs in intervals.items()})
        vals = [per_client[i] for i in sorted(per_client)]
        m = rec.metrics
        agg = sum(vals)
        m[FM.whole(FM.AGGREGATE, proto=proto)] = agg
        m[FM.WINDOW.key(proto=proto)] = win.length_s
        m[FM.WINDOW_START.key(proto=proto)] = win.start_s
        m.update({FM.whole(FM.PER_CLIENT, proto=proto, stat=k): v for k, v in W.distribution(vals).items()})
        m[FM.whole(FM.PROTO_JAIN, proto=proto)] = jain_index(vals)
        if proto == "udp":
            lost, packets = zip(*(W.loss_in(ivs, win) for ivs in intervals.values()), strict=True)
            m[FM.whole(FM.LOSS_PCT, proto=proto)] = 100.0 * sum(lost) / sum(packets) if sum(packets) else None
            m[FM.LOSS_CLIENTS.key(proto=proto)] = float(len(intervals))  # the clients that reported their loss
            m[FM.OFFERED.key(proto=proto)] = n * opts.udp_rate_bps
        server = sampler.results["server"]
        cpu_s = W.cpu_between(cumulative_cpu(server), win.start_s, win.end_s)
        m[FM.PROTO_SERVER_CPU_S.key(proto=proto)] = cpu_s
        m[FM.PROTO_SERVER_CPU_PCT.key(proto=proto)] = 100.0 * cpu_s / win.length_s
        m[FM.PROTO_CPU_PER_CLIENT.key(proto=proto)] = cpu_s / n
        m[FM.PROTO_CPU_PCT_PER_CLIENT.key(proto=proto)] = 100.0 * cpu_s / win.length_s / n
        m[FM.BITS_PER_CPU_S.key(proto=proto)] = agg * win.length_s / cpu_s if cpu_s > 0 else None
        m[FM.PROTO_SERVER_RSS_PEAK.key(proto=proto)] = float(server.rss_peak_bytes)
        clients_cg = sampler.results["clients"].cgroup_cpu
        if clients_cg is not None and sampler.wall_s > 0:
            # whole phase (cgroup totals): the N tunnel clients share this host's CPUs with the server, so a
            # saturated host measures the clients, not the server (keep N x rate well below one tunnel's max)
            m[FM.whole(FM.CLIENTS_CPU_S, proto=proto)] = clients_cg.total_s
            m[FM.CLIENTS_CPU_PCT.key(proto=proto)] = 100.0 * clients_cg.total_s / sampler.wall_s
        if mt.host_of():  # spread over several client hosts
            self._per_host(mt, rec, proto, per_client, failed_at, sampler, intervals, win)
        series = FM.PHASE_MONITORED.prefix(proto=proto)  # the phase's series: named as its figures
        rec.series[f"{series}aggregate_bps"] = W.per_second(intervals, win)
        rec.series[f"{series}per_client_bps"] = [(float(i), per_client[i]) for i in sorted(per_client)]
        cost_metrics(rec, sampler.results, sampler.wall_s, prefix="" if headline else series, sampled_roles=("server",))
        if headline:
            m.update(sampler.stage)  # what saturated, per side and host, over the phase (between hosts)
            rec.params.update(sampler.stage_params)
            m[core.THROUGHPUT.name] = agg
            m[core.WINDOW_S.name] = win.length_s
            m[FM.JAIN.name] = m[FM.whole(FM.PROTO_JAIN, proto=proto)]
            m[FM.CPU_PER_CLIENT.name] = m[FM.PROTO_CPU_PER_CLIENT.key(proto=proto)]
            m[FM.CPU_PCT_PER_CLIENT.name] = m[FM.PROTO_CPU_PCT_PER_CLIENT.key(proto=proto)]
            rec.streams = [(i, direction, per_client[i], None) for i in sorted(per_client)]

    @staticmethod
    def _per_host(
        mt: FleetSetup,
        rec: Measurement,
        proto: str,
        per_client: dict[int, float],
        failed_at: set[int],
        sampler: SampledCost,
        intervals: dict[int, list[W.Interval]],
        win: W.Span,
    ) -> None:
        """Each client host's figures of the phase (workloads/per_host.py): its clients' aggregate, median
        and fairness, loss, failures and their CPU there."""
        host_of = mt.host_of()
        for host, mine in by_host(host_of, per_client).items():
            where = {"on": FM.on(host), "proto": proto}
            vals = [mine[i] for i in sorted(mine)]
            m = rec.metrics
            m[FM.AGGREGATE.key(**where)] = sum(vals)
            m[FM.PER_CLIENT.key(**where, stat="p50")] = percentile(vals, 50)
            m[FM.PROTO_JAIN.key(**where)] = jain_index(vals)
            m[FM.FAILED.key(**where)] = float(sum(1 for i in failed_at if host_of[i] == host))
            if proto == "udp" and (ivs := [intervals[i] for i in mine if i in intervals]):
                lost, packets = zip(*(W.loss_in(iv, win) for iv in ivs), strict=True)
                m[FM.LOSS_PCT.key(**where)] = 100.0 * sum(lost) / sum(packets) if sum(packets) else None
            cost = sampler.per_host.get(host)
            if cost is not None and cost.cgroup_cpu is not None:
                m[FM.CLIENTS_CPU_S.key(**where)] = cost.cgroup_cpu.total_s

    # ---- non-linear growth across the sweep (within this run) -------------------------------------
    def _growth(self, ctx: FleetContext, rec: Measurement, opts: ClientsOptions, direction: str) -> None:
        n = ctx.clients
        key = (ctx.label, ctx.profile, direction)
        seen = self._costs.setdefault(key, {})
        cost = {
            name: float(v)
            for name in (FM.CPU_PER_CLIENT.name, FM.SERVER_RSS_PER_CLIENT.name)
            if isinstance(v := rec.metrics.get(name), int | float)
        }
        seen.setdefault(n, cost)
        for name, metric, vs_n in (
            (FM.CPU_PER_CLIENT.name, FM.CPU_GROWTH.name, FM.GROWTH_FROM.key(cost="cpu")),
            (FM.SERVER_RSS_PER_CLIENT.name, FM.RSS_GROWTH.name, FM.GROWTH_FROM.key(cost="rss")),
        ):
            by_n = {k: c[name] for k, c in seen.items() if name in c}
            ratio = W.growth_ratio(by_n)
            if ratio is not None and n == max(by_n):
                rec.metrics[metric] = ratio
                rec.metrics[vs_n] = float(min(by_n))
                warn = 1.0 if ratio > NONLINEAR_WARN_RATIO else 0.0
                rec.metrics[FM.NONLINEAR.name] = max(warn, rec.metrics.get(FM.NONLINEAR.name) or 0.0)
