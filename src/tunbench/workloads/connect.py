"""Tunnel setup time as a distribution: bring the tunnel up K times, each in a fresh topology with fresh
keys, and time it from starting the tunnel's processes to every readiness probe passing (handshake and a
ping through the tunnel included) — the pair shape's per-trial `setup_s`, K times over.

The measured thing is the bring-up itself: the runner hands it its own pair bring-up (a BringupContext).
"""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict, Field

from tunbench.errors import CommandFailed, TrialError, TunnelError
from tunbench.results import TrialRecord
from tunbench.stats import percentile
from tunbench.units import Window, fmt
from tunbench.workloads.base import TRIAL_SETUP_S, BringupContext, CaseAxes, Column, Measurement, Workload


class ConnectOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    count: int = Field(default=10, ge=1, le=1000, description="bring-ups per trial")


def connect_metrics(times_s: list[float], failures: int) -> dict[str, float | None]:
    """Distribution of the bring-up times (pure)."""
    return {
        "connect.p50_s": percentile(times_s, 50),
        "connect.p90_s": percentile(times_s, 90),
        "connect.min_s": min(times_s) if times_s else None,
        "connect.max_s": max(times_s) if times_s else None,
        "connect.mean_s": sum(times_s) / len(times_s) if times_s else None,
        "connect.count": float(len(times_s)),
        "connect.failures": float(failures),
    }


class ConnectWorkload(Workload[BringupContext, ConnectOptions]):
    kind = "connect"
    description = "tunnel setup time: K bring-ups (start to first packet through), p50/p90/max"
    axes = ()
    Options = ConnectOptions
    owns_bringup = True
    requires = ()
    columns = (
        Column("setup p50 ms", "connect.p50_s", "s"),
        Column("p90", "connect.p90_s", "s"),
        Column("max", "connect.max_s", "s"),
        Column("bring-ups", "connect.count", "n"),
        Column("failed", "connect.failures", "n"),
    )
    caption = "tunnel bring-up: start of its processes to a packet through it"

    def headline(self, rec: TrialRecord) -> str:
        m = rec.metrics
        return f"setup p50 {fmt(m.get('connect.p50_s'), 's')} ms, max {fmt(m.get('connect.max_s'), 's')} ms"

    def estimate(self, case: CaseAxes, options: BaseModel, window: Window) -> float:
        return self.opts(options).count * TRIAL_SETUP_S

    def measure(self, ctx: BringupContext) -> Measurement:
        opts = self.opts(ctx.options)
        rec = Measurement()
        times: list[float] = []
        errors: list[str] = []
        t_start = time.monotonic()
        for i in range(1, opts.count + 1):
            try:
                with ctx.bring_up(f"u{i}") as tunnel:
                    assert tunnel.setup_s is not None
                    times.append(tunnel.setup_s)
            except (TunnelError, CommandFailed) as e:
                errors.append(str(e).splitlines()[0])
        rec.window = (t_start, time.monotonic())
        if not times:
            raise TrialError(f"no bring-up of {opts.count} succeeded: {errors[0] if errors else 'unknown'}")
        rec.metrics.update(connect_metrics(times, len(errors)))
        rec.metrics["setup_s"] = percentile(times, 50)
        rec.series["connect_s"] = [(float(i), t) for i, t in enumerate(times, 1)]
        if errors:
            rec.artifacts["connect-errors.txt"] = "\n".join(errors).encode()
        return rec
