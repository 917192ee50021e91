"""Latency under load (after the RRUL test of flent): N upload + N download TCP flows through the tunnel
(iperf3 --bidir -P N) while irtt measures the RTT through the same tunnel, in three phases: idle before
(the baseline), during the load (after the --omit ramp-up), and after it (recovery: what is left queued).
The headline is the increase of the loaded RTT over the idle one (p50 and p99): the queueing the tunnel
adds, or hides from the path's AQM, under load. `summary = "flent"` adds Flent's own summary, the p50 and
p99 over every probe with the idle seconds included, idles Flent's 5 s and starts the flows as Flent's
netperf flows start, the upload's first (start = "flent": under BBR the direction that starts first is
held back for the 10 s BBR keeps its smallest RTT; docs/flent.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tunbench.errors import TrialError
from tunbench.host.place import Place, Proc
from tunbench.metrics import core
from tunbench.metrics import latency as lat
from tunbench.metrics.latency import PHASE
from tunbench.monitor.counters import COUNTER, ROLES
from tunbench.results import TrialRecord
from tunbench.stats import percentile
from tunbench.units import Window, fmt, mbit
from tunbench.workloads import iperf3, irtt
from tunbench.workloads.base import TRIAL_SETUP_S, CaseAxes, Column, Context, Measurement, Workload

LOAD_SLACK_S = 0.5  # the load outlasts irtt's sending by this much (irtt's own handshake)
# the RTT series of the three phases, (seconds since that phase's first probe, ms): what the Flent export
# (report/exporters/flent.py) places on one time axis with the load's `throughput_bps.{direction}` series
SERIES_IDLE = "latency_idle_ms"
SERIES_LOADED = "latency_loaded_ms"
SERIES_AFTER = "latency_after_ms"


IDLE_S = 2.0  # tunbench's idle phases
FLENT_IDLE_S = 5.0  # Flent's DELAY (its --delay, flent/settings.py): idle seconds before and after the load
Summary = Literal["tunbench", "flent"]
# how the load's flows start: all on one signal from one iperf3 --bidir, or one iperf3 per direction with
# the download's started down_lag_ms after the upload's, as Flent's netperf flows start (docs/flent.md)
Start = Literal["together", "flent"]
DOWN_LAG_MS = 50.0


class RrulOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    summary: Summary = Field(
        default="tunbench",
        description="tunbench: the loaded RTT's p50/p99 over the load's measured seconds only; flent: also "
        "Flent's summary, p50/p99 over every probe, the idle seconds before and after the load included "
        "(latency.whole_p50_ms, latency.whole_p99_ms), idle_s 5 unless given (docs/flent.md)",
    )
    idle_s: float = Field(
        default=IDLE_S,
        gt=0,
        le=60,
        description=f"seconds of idle RTT before and after the load ({IDLE_S:g}; {FLENT_IDLE_S:g}, Flent's, "
        'with summary = "flent")',
    )

    start: Start = Field(
        default="together",
        description="together: all flows from one iperf3 --bidir, started on one signal; flent: one iperf3 per "
        "direction, the download's started down_lag_ms after the upload's, so the upload's flows fill their "
        'queue first, as Flent\'s netperf flows do (the default with summary = "flent"; docs/flent.md)',
    )
    down_lag_ms: float = Field(
        default=DOWN_LAG_MS,
        ge=0,
        le=10_000,
        description=f"start = \"flent\": ms between starting the upload's iperf3 and the download's ({DOWN_LAG_MS:g})",
    )

    @model_validator(mode="before")
    @classmethod
    def _flent_defaults(cls, data: Any) -> Any:
        """summary = "flent" idles Flent's 5 s each side and starts the flows as Flent does, unless given."""
        if isinstance(data, dict) and data.get("summary") == "flent":
            return {"idle_s": FLENT_IDLE_S, "start": "flent", **data}
        return data


@dataclasses.dataclass(frozen=True)
class LoadProcess:
    """One iperf3 client of the load: its test, the server port it goes to and when it starts (s after the
    first)."""

    params: iperf3.Iperf3Params
    port_offset: int
    lag_s: float
    json_name: str


def load_processes(flows: int, duration_s: float, omit_s: float, opts: RrulOptions) -> list[LoadProcess]:
    """The iperf3 clients that make rrul's load (pure): one --bidir client, or with start = "flent" an
    upload client and, down_lag_ms later, a download (-R) client, each to its own server. iperf3 reads -t and
    -O as whole seconds."""
    base = iperf3.Iperf3Params(
        flows=flows, direction="bidir", duration_s=math.ceil(duration_s + LOAD_SLACK_S), omit_s=math.ceil(omit_s)
    )
    if opts.start == "together":
        return [LoadProcess(base, 0, 0.0, "iperf3-load.json")]
    lag = opts.down_lag_ms / 1000
    # the download runs as long after its start as the upload: both cover the loaded probes
    return [
        LoadProcess(dataclasses.replace(base, direction="up"), 0, 0.0, "iperf3-load-up.json"),
        LoadProcess(dataclasses.replace(base, direction="down"), 1, lag, "iperf3-load-down.json"),
    ]


def merge_directions(results: Sequence[iperf3.Iperf3Result]) -> iperf3.Iperf3Result:
    """The load's result from its clients' (pure): iperf3.merge, with each direction's intervals as its own
    client reported them (one client per direction: nothing to add up interval by interval)."""
    merged = iperf3.merge(list(results))
    if len(results) == 1:
        return merged
    return dataclasses.replace(merged, intervals=[pt for r in results for pt in r.intervals])


def phase_metrics(
    before: irtt.IrttResult, loaded: irtt.IrttResult, after: irtt.IrttResult, load: iperf3.Iperf3Result
) -> dict[str, float | None]:
    """The rrul headline numbers (pure). `idle` is the phase before the load (the baseline); the phase
    after it is reported on its own: a tunnel that queued a backlog (TCP-over-TCP) is still draining it."""
    p = percentile
    m: dict[str, float | None] = {
        PHASE.key(phase="idle", q=50): p(before.rtt_ms, 50),
        PHASE.key(phase="idle", q=99): p(before.rtt_ms, 99),
        PHASE.key(phase="loaded", q=50): p(loaded.rtt_ms, 50),
        PHASE.key(phase="loaded", q=90): p(loaded.rtt_ms, 90),
        PHASE.key(phase="loaded", q=99): p(loaded.rtt_ms, 99),
        lat.LOADED_MAX.name: max(loaded.rtt_ms) if loaded.rtt_ms else None,
        lat.LOADED_LOSS.name: loaded.loss,
        PHASE.key(phase="after", q=50): p(after.rtt_ms, 50),
        PHASE.key(phase="after", q=99): p(after.rtt_ms, 99),
        core.THROUGHPUT.name: load.throughput_bps,
        core.THROUGHPUT_DIR.key(direction="up"): load.up_bps,
        core.THROUGHPUT_DIR.key(direction="down"): load.down_bps,
        core.RETRANSMITS.name: load.retransmits,
    }
    for q in (50, 99):
        a, b = m[PHASE.key(phase="idle", q=q)], m[PHASE.key(phase="loaded", q=q)]
        m[lat.INCREASE.key(q=q)] = b - a if a is not None and b is not None else None
    return m


def whole_metrics(before: irtt.IrttResult, loaded: irtt.IrttResult, after: irtt.IrttResult) -> dict[str, float | None]:
    """Flent's summary of its ping series without a cut-off (pure): the p50 and p99 of every probe, the idle
    phases' with the loaded one's, as `flent -f summary` computes them over its whole test."""
    rtts = [*before.rtt_ms, *loaded.rtt_ms, *after.rtt_ms]
    return {PHASE.key(phase="whole", q=q): percentile(rtts, q) for q in (50, 99)}


def flent_summary(trials: Sequence[TrialRecord]) -> bool:
    """Whether any of these trials ran with summary = "flent" (their table shows Flent's figures)."""
    return any((t.params.get("workload") or {}).get("summary") == "flent" for t in trials)


class RrulWorkload(Workload[Context, RrulOptions]):
    kind = "rrul"
    description = "latency under load: irtt RTT idle / during N up + N down TCP flows (iperf3 --bidir) / idle"
    axes = ("flows",)
    layers = ("l3",)
    Options = RrulOptions
    requires = ("irtt", "iperf3")
    columns = (
        Column("idle p50 ms", PHASE.key(phase="idle", q=50), "ms"),
        Column("loaded p50", PHASE.key(phase="loaded", q=50), "ms"),
        Column("loaded p99", PHASE.key(phase="loaded", q=99), "ms"),
        Column("+p50", lat.INCREASE.key(q=50), "ms"),
        Column("+p99", lat.INCREASE.key(q=99), "ms"),
        Column("after p50", PHASE.key(phase="after", q=50), "ms"),
        Column("Mbit/s up / down", "|".join(core.THROUGHPUT_DIR.key(direction=d) for d in ("up", "down")), "mbit"),
        Column("TCP retrans c / s", "|".join(COUNTER.key(role=r, counter="tcp_retrans_segs") for r in ROLES), "n"),
    )
    caption = "RTT idle vs under load (N up + N down TCP flows); +pNN = loaded - idle"
    # summary = "flent": Flent's whole-test p50/p99 in place of the increase
    flent_columns = (
        *columns[:3],
        Column("Flent p50", PHASE.key(phase="whole", q=50), "ms"),
        Column("Flent p99", PHASE.key(phase="whole", q=99), "ms"),
        *columns[5:],
    )

    def table_columns(self, trials: Sequence[TrialRecord]) -> list[Column]:
        return list(self.flent_columns if flent_summary(trials) else self.columns)

    def headline(self, rec: TrialRecord) -> str:
        m = rec.metrics
        whole = m.get(PHASE.key(phase="whole", q=50))
        flent = f" (Flent's p50, idle included: {fmt(whole, 'ms')} ms)" if whole is not None else ""
        return (
            f"RTT p50 idle {fmt(m.get(PHASE.key(phase='idle', q=50)), 'ms')} → loaded "
            f"{fmt(m.get(PHASE.key(phase='loaded', q=50)), 'ms')} ms{flent}, {mbit(m.get(core.THROUGHPUT.name))} Mbit/s"
        )

    def prepare(self, ctx: Context, stack: contextlib.ExitStack) -> None:
        stack.enter_context(irtt.IrttServer(ctx))
        servers = 2 if self.opts(ctx.options).start == "flent" else 1
        for i in range(servers):
            port = ctx.server_port + i
            name = "iperf3-server.log" if i == 0 else f"iperf3-server-{i}.log"
            server = ctx.server.spawn(iperf3.server_argv(port), what="iperf3 server", log_name=name)
            stack.callback(server.stop)
            iperf3.wait_listening(ctx.server, port, server)

    def measure(self, ctx: Context) -> Measurement:
        opts = self.opts(ctx.options)
        idle_s = opts.idle_s
        before, raw_before = irtt.run_client(ctx, idle_s, "irtt-idle-before")
        plan = load_processes(ctx.flows, ctx.window.duration_s, ctx.window.omit_s, opts)
        ramp_s = plan[0].params.omit_s
        timeout_s = max(p.params.timeout_s + p.lag_s for p in plan)
        procs: list[Proc] = []
        t_load = time.monotonic()
        try:
            for p in plan:
                while (left := t_load + p.lag_s - time.monotonic()) > 0:
                    time.sleep(left)
                argv = iperf3.client_argv(ctx.target.address, ctx.target.port + p.port_offset, p.params)
                log = "iperf3-client.log" if p.port_offset == 0 else f"iperf3-client-{p.port_offset}.log"
                procs.append(
                    ctx.client.spawn(
                        [*argv, "--logfile", str(ctx.client.workdir / p.json_name)], what="iperf3 load", log_name=log
                    )
                )
            # irtt starts once the flows have ramped up (the --omit period) and stops before they do
            ramp_end = t_load + ramp_s
            while (left := ramp_end - time.monotonic()) > 0:
                if not all(d.alive() for d in procs):
                    break
                time.sleep(min(left, 0.05))
            for p, d in zip(plan, procs, strict=True):
                if not d.alive():
                    raise TrialError(f"iperf3 load exited early: {_tail(ctx.client, p.json_name, d)}")
            loaded, raw_loaded = irtt.run_client(ctx, ctx.window.duration_s, "irtt-loaded")
            for d in procs:
                if not _wait(d, timeout_s):
                    raise TrialError(f"iperf3 load did not finish within {timeout_s:g} s")
        finally:
            for d in procs:
                d.stop()
        texts = [(ctx.client.read(p.json_name) or b"").decode(errors="replace") for p in plan]
        load_res = merge_directions([iperf3.parse(t, p.params.direction) for p, t in zip(plan, texts, strict=True)])
        iperf3.check_roles(load_res)  # a crossed load leaves one direction unloaded: the latency under load is void
        after, raw_after = irtt.run_client(ctx, idle_s, "irtt-idle-after")
        m = Measurement(
            artifacts={
                "irtt-idle-before.json": raw_before,
                "irtt-loaded.json": raw_loaded,
                "irtt-idle-after.json": raw_after,
                **{
                    ("iperf3.json" if len(plan) == 1 else p.json_name): t.encode()
                    for p, t in zip(plan, texts, strict=True)
                },
            },
            # the load's measured seconds: its throughput series count from the end of the ramp-up
            # (iperf3's connect, a few round trips, is not subtracted)
            series_span=(t_load + ramp_s, t_load + ramp_s + load_res.duration_s),
        )
        m.metrics.update(phase_metrics(before, loaded, after, load_res))
        if opts.summary == "flent":
            m.metrics.update(whole_metrics(before, loaded, after))
        m.series[SERIES_IDLE] = irtt.rtt_series(before)
        m.series[SERIES_AFTER] = irtt.rtt_series(after)
        m.series[SERIES_LOADED] = irtt.rtt_series(loaded)
        iperf3.add_flows(m, load_res)
        return m

    def timeout_s(self, ctx: Context) -> float:
        return 2 * self.opts(ctx.options).idle_s + ctx.window.duration_s + ctx.window.omit_s + 90.0

    def estimate(self, case: CaseAxes, options: BaseModel, window: Window) -> float:
        return 2 * self.opts(options).idle_s + window.total_s + TRIAL_SETUP_S


def _tail(place: Place, name: str, d: Proc) -> str:
    text = (place.read(name) or b"").decode(errors="replace")
    return (text[-400:] or d.log_tail(5)).strip()


def _wait(proc: Proc, timeout_s: float) -> bool:
    """Until the process exits (True), or False after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while proc.alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
