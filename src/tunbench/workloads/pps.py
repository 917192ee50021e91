"""The packet-rate ladder (`pps`): per datagram size, the highest packet rate a tunnel delivers with loss at or
below a threshold, and what each packet costs the tunnel's processes on each side.

It is the RFC 2544 search of `udp-search` (udp.py's `zero_loss_search`, the same bisection) on a ladder of
small payloads, read in packets/s, plus one thing the bulk workloads hide: the CPU per packet. The edges of
every step are marked (Context.mark), so the trial shape reads each role's CPU over the step at the rate
found, exactly, and divides it by the packets delivered in it (Measurement.parts). The generator (iperf3)
is kept apart: its own CPU at that step is recorded beside the tunnel's, and a step whose sender could not
offer the rate asked is flagged: the figure is then iperf3's ceiling (or the tunnel pushing back on it), and
direct's figure at the same size says which.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tunbench.errors import CommandFailed, TrialError
from tunbench.metrics import Chart, Format, declare
from tunbench.monitor.counters import ROLES
from tunbench.results import TrialRecord
from tunbench.units import Window
from tunbench.workloads import iperf3
from tunbench.workloads.base import TRIAL_SETUP_S, CaseAxes, Column, Context, Measurement, Part, Workload
from tunbench.workloads.udp import (
    SENDER_SHORT,
    SearchResult,
    StepOutcome,
    UdpRun,
    delivered_pps,
    run_udp,
    zero_loss_search,
)

PPS_RATE = declare(
    "pps.{size}.delivered_pps", "packet/s", "higher", "wide",
    "The pps ladder: packets/s delivered at the highest offered rate whose loss stayed at or below the "
    "threshold, per UDP payload size.",
    title="pps {size} B", fmt=Format(4, 1.0, " pps"), chart=Chart("kpps", 1e-3), words=("faster", "slower"),
)  # fmt: skip
PPS_CPU = declare(
    "pps.{size}.cpu_us_per_packet.{role}", "us", "lower", "wide",
    "The pps ladder: one side's tunnel CPU (its cgroup's count) over the step at the rate found, in "
    "microseconds per packet delivered in that step; the generator's CPU is not in it.",
    title="CPU/packet {size} B {role}", fmt=Format(3, 1.0, " µs/packet"), chart=Chart("µs/packet"),
    words=("cheaper", "costlier"),
)  # fmt: skip
PPS_OFFERED = declare(
    "pps.{size}.offered_pps", "packet/s", "none", "info", "The pps ladder: the packet rate offered at the step found."
)
PPS_SENT = declare(
    "pps.{size}.sent_pps", "packet/s", "none", "info", "The pps ladder: the packet rate iperf3 sent at the step found."
)
PPS_LOSS = declare("pps.{size}.loss", "ratio", "none", "info", "The pps ladder: the loss at the step found.")
PPS_STEPS = declare("pps.{size}.steps", "count", "none", "info", "The pps ladder: steps its search took.")
PPS_CONVERGED = declare("pps.{size}.converged", "flag", "none", "info", "The pps ladder: 1 when the search converged.")
PPS_SENDER_LIMITED = declare(
    "pps.{size}.sender_limited", "flag", "none", "info",
    "The pps ladder: 1 when iperf3 sent less than 95% of the rate offered at the step found: the generator's "
    "own ceiling (direct's figure, where nothing else holds it back), or the tunnel's queue pushing back on the "
    "sender; direct's rate at the same size tells which.",
)  # fmt: skip
PPS_GENERATOR_CPU = declare(
    "pps.{size}.generator_cpu_pct.{role}", "%", "none", "info",
    "The pps ladder: iperf3's own CPU at the step found, on each side, in % of one core (its "
    "cpu_utilization_percent: host_total on the client, remote_total on the server).",
)  # fmt: skip


class PpsOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sizes: list[int] = Field(default=[64, 128, 256, 512, 1024, 1400], min_length=1, description="UDP payload bytes")
    loss_threshold: float = Field(default=0.001, ge=0, lt=1, description="fraction: 0.001 = 0.1%")
    min_pps: float = Field(default=1000.0, gt=0, description="the search's floor, packets/s")
    max_pps: float = Field(default=1_000_000.0, gt=0, description="its ceiling, the first rate offered")
    max_steps: int = Field(default=8, ge=1, le=20)
    tolerance: float = Field(default=0.05, gt=0, le=1)
    step_s: int = Field(default=1, ge=1, le=60, description="seconds per step (iperf3 counts whole seconds)")
    socket_buffer: str = Field(default="2M", pattern=r"^([0-9]+[KMG]?)?$", description="iperf3 -w ('' = default)")

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, v: list[int]) -> list[int]:
        for s in v:
            if not 16 <= s <= 65507:
                raise ValueError(f"payload size {s} out of range (16..65507)")
        return v

    @field_validator("max_pps")
    @classmethod
    def _above_floor(cls, v: float, info: Any) -> float:
        if v < (info.data.get("min_pps") or 0.0):
            raise ValueError("max_pps must be >= min_pps")
        return v


@dataclass(frozen=True)
class Rung:
    """One size of the ladder, assembled from its search and the step at the rate found."""

    size: int
    search: SearchResult
    best: UdpRun | None  # the step at the rate found (None: even the floor lost too much)

    def metrics(self) -> dict[str, float | None]:
        """Its figures, by declared key (the CPU per packet comes from the trial shape: `part`)."""
        s, best = self.size, self.best
        out: dict[str, float | None] = {
            PPS_STEPS.key(size=s): float(len(self.search.steps)),
            PPS_CONVERGED.key(size=s): 1.0 if self.search.converged else 0.0,
            PPS_OFFERED.key(size=s): self.search.rate_bps / (8 * s),
        }
        if best is None:
            out[PPS_RATE.key(size=s)] = 0.0
            return out
        r = best.result
        out[PPS_RATE.key(size=s)] = delivered_pps(best, s)
        out[PPS_SENT.key(size=s)] = r.sent_bps / (8 * s)
        out[PPS_LOSS.key(size=s)] = r.loss
        out[PPS_SENDER_LIMITED.key(size=s)] = 1.0 if r.sent_bps < SENDER_SHORT * self.search.rate_bps else 0.0
        for role, pct in generator_cpu(best.raw).items():
            out[PPS_GENERATOR_CPU.key(size=s, role=role)] = pct
        return out

    def part(self) -> Part | None:
        """The step at the rate found as a Part: the roles' CPU over it per packet delivered in it."""
        if self.best is None:
            return None
        delivered = self.best.result.packets - self.best.result.lost_packets
        keys = {role: PPS_CPU.key(size=self.size, role=role) for role in ROLES}
        # counted in millions of packets, so the CPU seconds per unit are microseconds per packet
        return Part(self.best.span[0], self.best.span[1], delivered / 1e6, keys)


def generator_cpu(raw: str) -> dict[str, float]:
    """iperf3's own CPU in one test, % of one core per side (its end.cpu_utilization_percent): host_total is
    the client's, remote_total the server's; {} when it reported none."""
    try:
        doc = iperf3.load_json(raw)
    except TrialError:
        return {}
    cpu = (doc.get("end") or {}).get("cpu_utilization_percent") or {}
    out = {}
    for role, field_ in (("client", "host_total"), ("server", "remote_total")):
        if isinstance(cpu.get(field_), int | float):
            out[role] = float(cpu[field_])
    return out


def ladder_columns(sizes: Sequence[int]) -> list[Column]:
    """The pps table: per size, the packets/s found (headed by the size, in thousands) and the CPU per packet of
    client / server in µs (headed "µs"), narrow enough for six sizes on one row of a wide terminal."""
    cols = []
    for s in sizes:
        cols.append(Column(f"{s} B", PPS_RATE.key(size=s), "k"))
        cols.append(Column("µs", "|".join(PPS_CPU.key(size=s, role=r) for r in ROLES), "us"))
    return cols


def sizes_in(metrics: dict[str, float | None]) -> list[int]:
    """The payload sizes a trial's ladder measured."""
    return sorted({int(PPS_RATE.values(k)["size"]) for k in metrics if PPS_RATE.matches(k)})


class PpsWorkload(Workload[Context, PpsOptions]):
    kind = "pps"
    description = (
        "small-packet ladder: per UDP payload size, the highest packets/s with loss <= a threshold (the "
        "zero-loss search), and the tunnel's CPU per packet per side"
    )
    axes = ("direction",)
    layers = ("l3",)
    Options = PpsOptions
    one_way = True
    caption = (
        "packet rate (pps ladder): under each payload size, the packets/s (k: thousands) delivered at the highest "
        "rate with loss <= the threshold; beside it, each side's tunnel CPU per packet at that rate (client / "
        "server, µs)"
    )
    compared = ((PPS_RATE, "throughput"), (PPS_CPU, "cpu"))

    @property
    def own_table(self) -> bool:
        return True

    def table_columns(self, trials: Sequence[TrialRecord]) -> list[Column]:
        return ladder_columns(sorted({s for t in trials for s in sizes_in(t.metrics)}))

    def headline(self, rec: TrialRecord) -> str:
        m = rec.metrics
        return "pps " + ", ".join(f"{s} B {_kpps(m.get(PPS_RATE.key(size=s)))}k" for s in sizes_in(m))

    def measure(self, ctx: Context) -> Measurement:
        opts = self.opts(ctx.options)
        m = Measurement()
        log: list[dict[str, Any]] = []
        for size in opts.sizes:
            rung = self._rung(ctx, opts, size, log)
            m.metrics.update(rung.metrics())
            if (part := rung.part()) is not None:
                m.parts.append(part)
            m.series[f"pps_loss.{size}"] = [(s.rate_bps / (8 * size), s.loss) for s in rung.search.steps]
        m.artifacts["pps.json"] = json.dumps(log, indent=1).encode()
        m.params["generator"] = {"program": "iperf3", "processes": 1, "flows": 1}
        return m

    def _rung(self, ctx: Context, opts: PpsOptions, size: int, log: list[dict[str, Any]]) -> Rung:
        runs: dict[float, UdpRun] = {}

        def step(rate_bps: float) -> StepOutcome:
            # a second try: a control connection can fail while the tunnel drains the previous overload
            for last in (False, True):
                try:
                    run = run_udp(
                        ctx, rate_bps=rate_bps, size=size, duration_s=opts.step_s, tag=f"pps {size} B",
                        buffer=opts.socket_buffer,
                    )  # fmt: skip
                    break
                except (TrialError, CommandFailed):
                    if last:
                        raise
            runs[rate_bps] = run
            log.append(
                {
                    "size": size,
                    "offered_pps": rate_bps / (8 * size),
                    "sent_pps": run.result.sent_bps / (8 * size),
                    "loss": run.result.loss,
                }
            )
            return StepOutcome(run.result.loss, run.result.delivered_bps)

        res = zero_loss_search(
            step,
            min_bps=opts.min_pps * 8 * size,
            max_bps=opts.max_pps * 8 * size,
            threshold=opts.loss_threshold,
            max_steps=opts.max_steps,
            tolerance=opts.tolerance,
        )
        return Rung(size, res, runs[res.best.rate_bps] if res.best else None)

    def timeout_s(self, ctx: Context) -> float:
        o = self.opts(ctx.options)
        return len(o.sizes) * o.max_steps * (o.step_s + 5.0) + 10.0

    def estimate(self, case: CaseAxes, options: BaseModel, window: Window) -> float:
        o = self.opts(options)
        return len(o.sizes) * o.max_steps * (o.step_s + 0.5) + TRIAL_SETUP_S  # at most: a search may end sooner


def _kpps(value: float | None) -> str:
    return "–" if value is None else f"{value / 1e3:.1f}"
