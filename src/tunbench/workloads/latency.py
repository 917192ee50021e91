"""Idle latency through the tunnel: irtt at a 10 ms interval for the trial's duration.

RTT percentiles, loss, one-way delays (irtt's server timestamps) and the per-packet RTT series (for CDFs).
UDP, so L3 tunnels (and direct) only; the target is the tunnel's inner server address.
"""

from __future__ import annotations

import contextlib

from pydantic import BaseModel, ConfigDict, Field

from tunbench.metrics import latency as lat
from tunbench.results import TrialRecord
from tunbench.units import fmt
from tunbench.workloads import irtt
from tunbench.workloads.base import Column, Context, Measurement, Workload

ONE_WAY = ("send", "receive")  # up, down: irtt's one-way delays


class LatencyOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    interval_ms: float = Field(default=10.0, gt=0.1, le=1000.0)


class LatencyWorkload(Workload[Context, LatencyOptions]):
    kind = "latency"
    description = "idle RTT (irtt, 10 ms interval): p50/p90/p99/max, loss, one-way delays"
    axes = ()
    layers = ("l3",)
    Options = LatencyOptions
    requires = ("irtt",)
    columns = (
        Column("RTT p50 ms", lat.LATENCY.key(q=50), "ms"),
        Column("p90", lat.LATENCY.key(q=90), "ms"),
        Column("p99", lat.LATENCY.key(q=99), "ms"),
        Column("max", lat.LATENCY_MAX.name, "ms"),
        Column("loss", lat.LATENCY_LOSS.name, "frac"),
        Column(
            "one-way p50 ms (up / down)", "|".join(lat.LATENCY_DIR.key(way=w, q=50) for w in ("send", "receive")), "ms"
        ),
    )

    def headline(self, rec: TrialRecord) -> str:
        m = rec.metrics
        p50, p99 = m.get(lat.LATENCY.key(q=50)), m.get(lat.LATENCY.key(q=99))
        return f"RTT p50 {fmt(p50, 'ms')} ms, p99 {fmt(p99, 'ms')} ms"

    def prepare(self, ctx: Context, stack: contextlib.ExitStack) -> None:
        stack.enter_context(irtt.IrttServer(ctx))

    def measure(self, ctx: Context) -> Measurement:
        interval = f"{self.opts(ctx.options).interval_ms:g}ms"
        r, raw = irtt.run_client(ctx, ctx.window.duration_s, "irtt", interval=interval)
        m = Measurement(artifacts={"irtt.json": raw})
        m.metrics.update(irtt.rtt_metrics(r, clock_skew=ctx.clock_skew))
        m.series["latency_ms"] = irtt.rtt_series(r)
        return m

    def timeout_s(self, ctx: Context) -> float:
        return ctx.window.duration_s + 30.0
