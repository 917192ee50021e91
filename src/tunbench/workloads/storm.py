"""Workload `storm` (the OpenVPN C-1..3 procedure): N clients start at once (or `rate_per_s`), and each
client's time from the storm's start to a working tunnel is measured (ready = an ICMP echo through the
tunnel is answered, from that client's namespace).

Variants (the `variants` option; each is a case of its own, Case.variant):
- connect:   the storm itself.
- reconnect: a first storm connects every client (reported as clients.connect.*), then all clients drop
             at once and come back: the measured storm.
- overload:  the server's CPU is capped (cgroup cpu quota, `overload_cpu_pct` of one core) for the first
             `overload_s` of the storm, so connections are offered beyond what it handles; then the cap is
             lifted. Does every client end up with a working tunnel, and how long after the overload ends?
"""

from __future__ import annotations

import logging
import threading
import time
from typing import ClassVar

from pydantic import BaseModel

from tunbench.errors import TrialError
from tunbench.metrics import Metrics
from tunbench.metrics.core import WINDOW_S
from tunbench.monitor.cost import cost_metrics
from tunbench.results import TrialRecord
from tunbench.sites.base import PER_CLIENT_SETUP_S, FleetSetup
from tunbench.stats import percentile
from tunbench.units import Window, fmt
from tunbench.workloads import fleet_metrics as FM
from tunbench.workloads import spans as W
from tunbench.workloads.base import (
    TRIAL_SETUP_S,
    CaseAxes,
    Column,
    FleetContext,
    FleetWorkload,
    Measurement,
    ReadySeries,
    Scaling,
)
from tunbench.workloads.fleet_options import StormOptions
from tunbench.workloads.per_host import by_host, lost_indices, without

log = logging.getLogger(__name__)

# where a storm stores its clients' ready times (FleetWorkload.ready: the report's time-to-ready CDF)
READY = ReadySeries("clients.ready_cdf", "clients.ready_s_by_client")


class StormWorkload(FleetWorkload[StormOptions]):
    kind = "storm"
    description = "N clients connect at once (C-style): time to a working tunnel, handshakes/s, overload recovery"
    axes: ClassVar[tuple[str, ...]] = ("clients", "variant")
    Options: ClassVar[type[BaseModel]] = StormOptions
    layers: ClassVar[tuple[str, ...]] = ("l3",)
    requires: ClassVar[tuple[str, ...]] = ()
    fleet_on_hosts: ClassVar[bool] = True  # spread over the client hosts, started at one agreed instant
    columns: ClassVar[tuple[Column, ...]] = (
        Column("ready", FM.whole(FM.READY_COUNT), "n"),
        Column("p50 s", FM.whole(FM.READY_P, q=50), "sec"),
        Column("p90", FM.whole(FM.READY_P, q=90), "sec"),
        Column("p99", FM.whole(FM.READY_P, q=99), "sec"),
        Column("max", FM.whole(FM.READY_MAX), "sec"),
        Column("hs/s", FM.whole(FM.HANDSHAKES_PER_S), "n"),
        Column("srv CPU-s", FM.whole(FM.SERVER_CPU_S), "sec"),
    )
    scaling: ClassVar[tuple[Scaling, ...]] = (W.RSS_PER_CLIENT,)
    ready: ClassVar[ReadySeries | None] = READY
    caption: ClassVar[str] = (
        "N clients started at once: time to a working tunnel (an echo through it answered); hs/s: handshakes per "
        "second at the server"
    )

    def headline(self, rec: TrialRecord) -> str:
        m = rec.metrics
        return (
            f"{fmt(m.get(FM.whole(FM.READY_COUNT)), 'n')}/{rec.clients} ready"
            f" · p50 {fmt(m.get(FM.whole(FM.READY_P, q=50)), 'sec')} s"
            f" · max {fmt(m.get(FM.whole(FM.READY_MAX)), 'sec')} s"
        )

    def sweeps(self, options: BaseModel) -> tuple[list[int], list[str]]:
        o = self.opts(options)
        return list(o.clients), list(o.variants)

    def cpu_cap(self, case: CaseAxes) -> bool:
        return _variant(case.variant) == "overload"

    def probe_interval_s(self, options: BaseModel) -> float:
        return self.opts(options).probe_interval_s

    def start_tolerance_s(self, options: BaseModel) -> float | None:
        return self.opts(options).start_tolerance_s

    def estimate(self, case: CaseAxes, options: BaseModel, window: Window) -> float:
        """A reconnect storms twice, an overload holds its CPU cap for overload_s."""
        o = self.opts(options)
        storms = 2.0 if case.variant == "reconnect" else 1.0
        overload = o.overload_s if case.variant == "overload" else 0.0
        return TRIAL_SETUP_S + case.clients * PER_CLIENT_SETUP_S * storms + overload

    def measure(self, ctx: FleetContext) -> Measurement:
        opts = self.opts(ctx.options)
        n, variant = ctx.clients, _variant(ctx.variant)
        rec = Measurement()
        mt = ctx.env
        base_rss = sum(mt.fleet.rss("server"))
        if variant == "reconnect":
            self._storm(mt, opts, rec, FM.FIRST_STORM, measured=False)
            mt.fleet.stop_clients(list(mt.layout.indices()))
        self._storm(mt, opts, rec, "", measured=True, overload=variant == "overload")
        conn_rss = sum(mt.fleet.rss("server"))
        client_rss = mt.fleet.rss("clients")
        ready = int(rec.metrics.get(FM.whole(FM.READY_COUNT)) or 0)
        rec.metrics[FM.SERVER_RSS_BASE.name] = float(base_rss)
        rec.metrics[FM.SERVER_RSS_CONNECTED.name] = float(conn_rss)
        rec.metrics[FM.SERVER_RSS_PER_CLIENT.name] = (conn_rss - base_rss) / ready if ready else None
        rec.metrics[FM.CLIENT_RSS_MEAN.name] = sum(client_rss) / len(client_rss) if client_rss else None
        mt.fleet.check_server()
        assert n == mt.layout.clients
        return rec

    def _storm(
        self,
        mt: FleetSetup,
        opts: StormOptions,
        rec: Measurement,
        storm: str,
        *,
        measured: bool,
        overload: bool = False,
    ) -> None:
        """One storm, its figures under ``{storm}`` (fleet_metrics.py): "" for the measured one, FIRST_STORM for
        a reconnect's first."""
        lay, probe, n = mt.layout, mt.probe, mt.layout.clients
        assert probe is not None
        timer: threading.Timer | None = None
        lifted: list[float] = []  # when the overload's cap was lifted
        spread = bool(mt.host_of())  # over several client hosts: started at one agreed instant
        lead = mt.start_lead_s(opts.start_tolerance_s) if opts.rate_per_s <= 0 else None
        with mt.counters(rec.metrics, "" if measured else FM.STORM_MONITORED.prefix()), mt.sampling() as sampler:
            t0 = time.monotonic()
            if overload:
                cap = mt.cap
                if cap is None:
                    raise TrialError("the overload variant needs a CPU cap on the server, which this site lacks")
                cap.limit(opts.overload_cpu_pct)

                def lift() -> None:
                    cap.limit(None)
                    lifted.append(time.monotonic())

                timer = threading.Timer(opts.overload_s, lift)
                timer.start()
            probe.watch(lay.indices())
            try:
                errors = mt.fleet.up(
                    lay.indices(), rate_per_s=opts.rate_per_s, timeout_s=opts.timeout_s, start_lead_s=lead
                )
                if mt.fleet.started_at is not None:  # between hosts: the storm began at the agreed instant
                    t0 = mt.fleet.started_at
                probe.wait(lay.indices(), t0 + opts.timeout_s)
            finally:
                if timer is not None:
                    timer.cancel()
                    if mt.cap is not None:
                        mt.cap.limit(None)
            elapsed = time.monotonic() - t0
        # a client host lost meanwhile loses its share: the storm is the other hosts' clients (trial/fleet.py
        # marks the lost ones); a lost server fails the trial before this
        gone = lost_indices(mt.host_of(), mt.lost_clients())
        n -= len(gone)
        ready_at = without(probe.ready_at, gone)
        launched = {i: t - t0 for i, t in without(mt.fleet.launched_at, gone).items() if i in lay.indices()}
        errors = without(errors, gone)
        m = rec.metrics
        m.update(ready_metrics(storm, ready_at, launched, t0, n))
        counts = W.per_second_counts([ready_at[i] - t0 for i in sorted(ready_at)])
        ready_s = sorted(ready_at[i] - t0 for i in ready_at)
        m[FM.STORM_S.key(storm=storm)] = elapsed
        if errors:
            m[FM.CLIENT_ERRORS.key(storm=storm)] = float(len(errors))
        server = sampler.results["server"]
        cpu_s = server.cgroup_cpu.total_s if server.cgroup_cpu else server.cpu.total_s
        # the server's cost per phase (the wiki's server statistics): CPU over the phase, peak memory
        m[FM.SERVER_CPU_S.key(storm=storm)] = cpu_s
        m[FM.SERVER_CPU_PCT.key(storm=storm)] = 100.0 * cpu_s / sampler.wall_s if sampler.wall_s > 0 else None
        m[FM.SERVER_RSS_PEAK.key(storm=storm)] = float(server.rss_peak_bytes)
        if spread:
            self._hosts(mt, opts, m, storm, ready_at, launched, t0)
        if overload:
            # the cap held from before the first launch until it was lifted: between hosts the storm's start
            # is the agreed instant, a lead after the cap began, so the overload is measured from the start
            end = (lifted[0] if lifted else time.monotonic()) - t0
            m[FM.OVERLOAD_S.name] = end
            m[FM.OVERLOAD_CPU.name] = opts.overload_cpu_pct
            m[FM.READY_IN_OVERLOAD.name] = float(sum(1 for t in ready_s if t <= end))
            late = [t for t in ready_s if t > end]
            all_ready = len(ready_s) == n
            # how long after the cap was lifted until the last client had a working tunnel
            m[FM.RECOVERY_S.name] = (max(late) - end if late else 0.0) if all_ready else None
        if not measured:
            if len(ready_s) < n:
                raise TrialError(f"first storm: only {len(ready_s)} of {n} clients ready:\n{mt.failures_text(errors)}")
            return
        rec.metrics[WINDOW_S.name] = elapsed
        rec.series[READY.cdf] = W.ready_cdf(ready_s, n)
        rec.series["clients.ready_per_s"] = counts
        rec.series[READY.by_client] = [(float(i), ready_at[i] - t0) for i in sorted(ready_at)]
        rec.streams = [(i, "ready_s", ready_at[i] - t0, None) for i in sorted(ready_at)]
        m[FM.CPU_PER_CLIENT.name] = cpu_s / len(ready_s) if ready_s else None
        cost_metrics(rec, sampler.results, sampler.wall_s, sampled_roles=("server",))
        m.update(sampler.stage)  # what saturated, per side and host, over the storm (between hosts)
        rec.params.update(sampler.stage_params)
        if errors and len(ready_s) < n:
            rec.artifacts["client_errors.txt"] = mt.failures_text(errors, limit=20).encode()

    @staticmethod
    def _hosts(
        env: FleetSetup,
        opts: StormOptions,
        m: Metrics,
        storm: str,
        ready_at: dict[int, float],
        launched: dict[int, float],
        t0: float,
    ) -> None:
        """Between hosts: each client host's storm figures, and the start skew achieved among the hosts
        (each host's first launch against the agreed instant, on this machine's clock)."""
        host_of, lost = env.host_of(), env.lost_clients()
        split_ready = by_host(host_of, ready_at)
        split_launched = by_host(host_of, launched)
        for name, count in env.clients_per_host().items():
            if name in lost:
                continue  # its share is lost (trial/fleet.py marks it)
            mine, launches = split_ready.get(name, {}), split_launched.get(name, {})
            m.update(ready_metrics(storm, mine, launches, t0, count, host=name))
        late = env.start_late_s()
        if late:
            for name, s in late.items():
                m[FM.START_LATE.key(host=name, storm=storm)] = s
            skew = max(late.values()) - min(late.values()) if len(late) > 1 else 0.0
            unc = env.clock_uncertainty_s()
            m[FM.START_SKEW.key(storm=storm)] = skew
            m[FM.START_SKEW_UNCERTAINTY.key(storm=storm)] = unc
            m[FM.START_TOLERANCE.key(storm=storm)] = opts.start_tolerance_s
            if skew + unc > opts.start_tolerance_s:
                log.warning(
                    "the storm started %.1f ms (± %.1f ms) apart on the client hosts, more than its "
                    "start_tolerance_s of %.1f ms: %s",
                    1e3 * skew,
                    1e3 * unc,
                    1e3 * opts.start_tolerance_s,
                    ", ".join(f"{h} {1e3 * s:+.1f} ms" for h, s in late.items()),
                )


def ready_metrics(
    storm: str,
    ready_at: dict[int, float],
    launched: dict[int, float],
    t0: float,
    n: int,
    *,
    host: str | None = None,
) -> Metrics:
    """A storm's readiness figures of `n` clients (all of them, or one `host`'s) in one storm (``{storm}``, "" or
    FIRST_STORM): how many came up, the time to ready from the storm's start (percentiles, max) and from each
    one's launch, the launch spread and the handshakes per second."""
    where = {"on": FM.on(host), "storm": storm}
    ready_s = [ready_at[i] - t0 for i in sorted(ready_at)]
    from_launch = [ready_at[i] - t0 - launched[i] for i in sorted(ready_at) if i in launched]
    m: Metrics = {
        FM.READY_COUNT.key(**where): float(len(ready_s)),
        FM.SUCCESS_RATIO.key(**where): len(ready_s) / n if n else None,
        FM.FAILED_COUNT.key(**where): float(n - len(ready_s)),
    }
    for q in (50, 90, 99):
        m[FM.READY_P.key(**where, q=q)] = percentile(ready_s, q) if ready_s else None
    m[FM.READY_MAX.key(**where)] = max(ready_s) if ready_s else None
    for q in (50, 99):
        m[FM.READY_FROM_LAUNCH.key(**where, q=q)] = percentile(from_launch, q) if from_launch else None
    m[FM.LAUNCH_SPREAD.key(**where)] = max(launched.values()) if launched else None
    counts = W.per_second_counts(ready_s)
    m[FM.HANDSHAKES_PEAK.key(**where)] = max((c for _, c in counts), default=0.0)
    m[FM.HANDSHAKES_PER_S.key(**where)] = len(ready_s) / max(ready_s) if ready_s and max(ready_s) > 0 else None
    return m


def _variant(name: str) -> str:
    """The storm variant of a case: connect, reconnect or overload (anything else: connect)."""
    return name if name in ("connect", "reconnect", "overload") else "connect"
