"""A toy workload, kept with the test that proves a workload is a plug-in: ICMP echo RTT through the
tunnel with ping(8). Everything tunbench needs to plan, run, check, tabulate and export it is here; the
test registers it with one line (as workloads/__init__.py registers the built-in ones)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from tunbench.errors import TrialError
from tunbench.host.proc import run_cmd
from tunbench.units import Window
from tunbench.workloads.base import TRIAL_SETUP_S, CaseAxes, Column, Context, Measurement, Workload


class PingOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    count: int = Field(default=20, ge=1, le=1000, description="echo requests per trial")
    interval_s: float = Field(default=0.05, ge=0.01, le=1.0, description="seconds between requests")


def parse(text: str) -> dict[str, float | None]:
    """ping -q's summary: loss from 'N packets transmitted, M received', RTTs from 'min/avg/max/mdev'."""
    sent = re.search(r"(\d+) packets transmitted, (\d+) (?:packets )?received", text)
    if sent is None:
        raise TrialError(f"ping printed no summary: {text.strip()[-200:]}")
    tx, rx = int(sent.group(1)), int(sent.group(2))
    rtt = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", text)
    low, avg, high = (float(rtt.group(i)) for i in (1, 2, 3)) if rtt else (None, None, None)
    return {"ping.min_ms": low, "ping.avg_ms": avg, "ping.max_ms": high, "ping.loss": (tx - rx) / tx if tx else None}


class PingWorkload(Workload[Context, PingOptions]):
    kind = "ping"
    description = "ICMP echo RTT through the tunnel (ping): min/avg/max, loss"
    requires = ("ping",)
    axes = ()
    layers = ("l3",)
    Options = PingOptions
    columns = (
        Column("RTT avg ms", "ping.avg_ms", "ms"),
        Column("min", "ping.min_ms", "ms"),
        Column("max", "ping.max_ms", "ms"),
        Column("loss", "ping.loss", "frac"),
    )
    caption = "ICMP echo through the tunnel (toy workload)"

    def estimate(self, case: CaseAxes, options: PingOptions, window: Window) -> float:  # type: ignore[override]
        return options.count * options.interval_s + TRIAL_SETUP_S

    def measure(self, ctx: Context) -> Measurement:
        o = self.opts(ctx.options)
        res = run_cmd(
            ["ping", "-n", "-q", "-c", str(o.count), "-i", f"{o.interval_s:g}", ctx.target.address],
            netns=ctx.topo.client.name,
            timeout_s=o.count * o.interval_s + 10.0,
            check=False,
            what=f"ping ({ctx.title})",
        )
        return Measurement(metrics=parse(res.stdout))
