"""UDP through the tunnel with iperf3: a fixed offered rate and datagram size (`udp`), and the RFC 2544
throughput search (`udp-search`): the highest offered rate whose loss stays at or below a threshold,
per datagram size, by bisection in a bounded number of short steps.

iperf3's UDP rate is always given explicitly (its default is 1 Mbit/s, which measures nothing).
The search logic is a pure function of a `measure(rate) -> loss` callable, unit-tested without a network.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tunbench.errors import CommandFailed, TrialError
from tunbench.metrics import declare
from tunbench.metrics.core import THROUGHPUT
from tunbench.monitor.counters import COUNTER, ROLES
from tunbench.results import TrialRecord
from tunbench.units import RateText, Window, fmt, mbit, parse_rate
from tunbench.workloads import iperf3
from tunbench.workloads.base import TRIAL_SETUP_S, CaseAxes, Column, Context, Measurement, Workload

UDP_RATE = declare(
    "udp.{rate}_bps", "bit/s", "higher", "info", "The udp workload's offered, sent and delivered bit rates.",
    choices={"rate": ("offered", "sent", "delivered")},
)  # fmt: skip
UDP_FIGURE = declare(
    "udp.{figure}", "", "none", "info",
    "The udp workload's other figures: loss (a share), its percentage, jitter, datagrams, lost, out of order.",
    choices={"figure": ("loss", "loss_pct", "jitter_ms", "packets", "lost_packets", "out_of_order")},
)  # fmt: skip
ZERO_LOSS = declare(
    "zero_loss_bps.{size}", "bit/s", "higher", "info", "The highest rate carried without loss, per datagram size."
)
ZERO_LOSS_OFFERED = declare(
    "zero_loss_offered_bps.{size}",
    "bit/s",
    "none",
    "info",
    "The rate offered at the zero-loss step.",
)
ZERO_LOSS_PPS = declare("zero_loss_pps.{size}", "packet/s", "higher", "info", "The zero-loss rate in packets/s.")
SEARCH_STEPS = declare("search_steps.{size}", "count", "none", "info", "Steps of the zero-loss search.")
SEARCH_CONVERGED = declare("search_converged.{size}", "flag", "none", "info", "1 when the search converged.")
SENDER_LIMITED = declare(
    "zero_loss_sender_limited.{size}", "flag", "none", "info", "1 when the sender could not reach the rate offered."
)


def whole_seconds(duration_s: float) -> int:
    """iperf3 reads -t as an integer (atoi: 0.5 would become 0, i.e. run forever)."""
    return max(1, round(duration_s))


# ---- iperf3 UDP: argv and parser -------------------------------------------------------------------


def udp_client_argv(
    address: str, port: int, *, rate_bps: float, size: int, duration_s: float, reverse: bool, buffer: str = ""
) -> list[str]:
    """A larger socket buffer at both ends (`buffer`, iperf3's -w) makes the loss measured the tunnel's,
    not the bursts iperf3's own receiving socket cannot absorb (its kernel default is ~200 KiB)."""
    p = iperf3.Iperf3Params(
        direction="down" if reverse else "up",
        duration_s=whole_seconds(duration_s),
        omit_s=0,
        protocol="udp",
        rate_bps=rate_bps,
        length=size,
        buffer=buffer,
    )
    return iperf3.client_argv(address, port, p)


@dataclass(frozen=True)
class UdpResult:
    sent_bps: float  # what the sender actually put on the wire (it may fall short of the offered rate)
    loss: float  # fraction of datagrams lost, receiver side
    delivered_bps: float  # the bytes that arrived over the sender's seconds (`delivered`)
    jitter_ms: float
    packets: int
    lost_packets: int
    out_of_order: int = 0
    intervals: list[tuple[float, float]] = field(default_factory=list)


def parse_udp(text: str) -> UdpResult:
    doc = iperf3.load_json(text)
    end: dict[str, Any] = doc.get("end") or {}
    recv = end.get("sum_received") or end.get("sum")
    sent = end.get("sum_sent") or end.get("sum")
    if not recv or not sent:
        raise TrialError("iperf3 JSON has no end.sum_received (UDP test did not complete)")
    packets = int(recv.get("packets", 0))
    lost = int(recv.get("lost_packets", 0))
    loss = lost / packets if packets > 0 else 1.0
    sent_bps = float(sent.get("bits_per_second", 0.0))
    loss = max(0.0, min(1.0, loss))
    ooo = sum(int((s.get("udp") or {}).get("out_of_order", 0)) for s in end.get("streams", []))
    intervals = [
        (float(iv["sum"]["end"]), float(iv["sum"]["bits_per_second"]))
        for iv in doc.get("intervals", [])
        if iv.get("sum") and not iv["sum"].get("omitted")
    ]
    return UdpResult(
        sent_bps=sent_bps,
        loss=loss,
        delivered_bps=delivered(recv, sent, sent_bps, loss),
        jitter_ms=float(recv.get("jitter_ms", 0.0)),
        packets=packets,
        lost_packets=lost,
        out_of_order=ooo,
        intervals=intervals,
    )


def delivered(recv: dict[str, Any], sent: dict[str, Any], sent_bps: float, loss: float) -> float:
    """The bit rate that arrived, on the sender's clock (pure): the receiver's bytes (its datagrams less those
    lost) over the sender's seconds, the step's length. Not over the receiver's seconds, which run on while
    a tunnel drains its queue after the sender stops (51 ms past a 2 s test of wireguard-go at 500 Mbit/s);
    and not the sent rate times (1 - loss), which counts as delivered the datagrams still in flight at the end
    that the receiver never saw (39 of 104,129 there). Where iperf3 gives no receiver's bytes (a report with
    one `sum`), the sent rate times (1 - loss)."""
    seconds = float(sent.get("seconds") or 0.0)
    if recv is not sent and "bytes" in recv and seconds > 0:
        return 8.0 * float(recv["bytes"]) / seconds
    return sent_bps * (1.0 - loss)


@dataclass(frozen=True)
class UdpRun:
    """One iperf3 UDP test: its result, its JSON, and the client's run as (start, end) from Context.mark."""

    result: UdpResult
    raw: str
    span: tuple[float, float]


def run_udp(
    ctx: Context, *, rate_bps: float, size: int, duration_s: float, tag: str, buffer: str, dont_fragment: bool = False
) -> UdpRun:
    """One UDP test against a fresh one-test iperf3 server (a wedged server cannot poison the next step). The
    client's run is marked at both ends (Context.mark), so the roles' CPU over it can be read exactly."""
    if ctx.direction == "bidir":
        raise TrialError("UDP workloads measure one direction at a time: use --direction up and/or down")
    server = ctx.server.spawn(iperf3.server_argv(ctx.server_port), what="iperf3 server", log_name="iperf3-server.log")
    try:
        iperf3.wait_listening(ctx.server, ctx.server_port, server)
        argv = udp_client_argv(
            ctx.target.address,
            ctx.target.port,
            rate_bps=rate_bps,
            size=size,
            duration_s=duration_s,
            reverse=ctx.direction == "down",
            buffer=buffer,
        )
        if dont_fragment:
            argv.append("--dont-fragment")
        start = ctx.mark()
        res = ctx.client.run(
            argv,
            timeout_s=whole_seconds(duration_s) + 15.0,
            check=False,
            what=f"iperf3 UDP client ({ctx.title}, {tag})",
        )
        end = ctx.mark()
    finally:
        server.stop()
    if res.returncode != 0 and not res.stdout.strip().startswith("{"):
        raise TrialError(f"iperf3 UDP client exit {res.returncode}: {(res.stderr or res.stdout).strip()[-400:]}")
    return UdpRun(parse_udp(res.stdout), res.stdout, (start, end))


SENDER_SHORT = 0.95
"""A step whose sender sent less than this share of the rate offered was held back by the sender (iperf3
itself, or the tunnel's queue pushing back), not by the path: `sender_limited`."""


def delivered_pps(run: UdpRun, size: int) -> float:
    """Packets/s that arrived in a step: its delivered bit rate over the datagram's bits (iperf3 counts the
    UDP payload only, so this is the datagram rate)."""
    return run.result.delivered_bps / (8.0 * size)


# ---- workload `udp` --------------------------------------------------------------------------------


class UdpOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rate: RateText = Field(default="500mbit", description="offered rate (e.g. 500mbit, 1gbit)")
    size: int = Field(default=1200, ge=16, le=65507, description="UDP payload bytes per datagram")
    socket_buffer: str = Field(default="2M", pattern=r"^([0-9]+[KMG]?)?$", description="iperf3 -w ('' = default)")


class UdpWorkload(Workload[Context, UdpOptions]):
    kind = "udp"
    description = "UDP at a fixed offered rate and datagram size (iperf3 -u): delivered rate, loss, jitter"
    axes = ("direction",)
    layers = ("l3",)
    Options = UdpOptions
    one_way = True
    columns = (
        Column("offered Mbit/s", UDP_RATE.key(rate="offered"), "mbit"),
        Column("delivered", UDP_RATE.key(rate="delivered"), "mbit"),
        Column("loss", UDP_FIGURE.key(figure="loss"), "frac"),
        Column("jitter ms", UDP_FIGURE.key(figure="jitter_ms"), "ms"),
        Column("rcvbuf errs c / s", "|".join(COUNTER.key(role=r, counter="udp_rcvbuf_errors") for r in ROLES), "n"),
    )

    def headline(self, rec: TrialRecord) -> str:
        m = rec.metrics
        delivered, loss = m.get(UDP_RATE.key(rate="delivered")), m.get(UDP_FIGURE.key(figure="loss"))
        return f"{mbit(delivered)} Mbit/s delivered, loss {fmt(loss, 'frac')}"

    def measure(self, ctx: Context) -> Measurement:
        opts = self.opts(ctx.options)
        rate = parse_rate(opts.rate)
        run = run_udp(
            ctx,
            rate_bps=rate,
            size=opts.size,
            duration_s=ctx.window.duration_s,
            tag=opts.rate,
            buffer=opts.socket_buffer,
        )
        r, raw = run.result, run.raw
        m = Measurement(artifacts={"iperf3-udp.json": raw.encode()})
        m.metrics.update(
            {
                THROUGHPUT.name: r.delivered_bps,
                UDP_RATE.key(rate="offered"): rate,
                UDP_RATE.key(rate="sent"): r.sent_bps,
                UDP_RATE.key(rate="delivered"): r.delivered_bps,
                UDP_FIGURE.key(figure="loss"): r.loss,
                UDP_FIGURE.key(figure="loss_pct"): 100.0 * r.loss,
                UDP_FIGURE.key(figure="jitter_ms"): r.jitter_ms,
                UDP_FIGURE.key(figure="packets"): float(r.packets),
                UDP_FIGURE.key(figure="lost_packets"): float(r.lost_packets),
                UDP_FIGURE.key(figure="out_of_order"): float(r.out_of_order),
            }
        )
        if r.intervals:
            m.series["udp_sent_bps"] = r.intervals
        return m

    def timeout_s(self, ctx: Context) -> float:
        return ctx.window.duration_s + 20.0


# ---- the RFC 2544 search (pure) ------------------------------------------------------------------------


@dataclass(frozen=True)
class StepOutcome:
    loss: float  # fraction
    delivered_bps: float | None = None  # what arrived: a hint for where the limit is


@dataclass(frozen=True)
class SearchStep:
    rate_bps: float
    loss: float
    passed: bool
    delivered_bps: float | None = None


@dataclass(frozen=True)
class SearchResult:
    rate_bps: float  # the highest offered rate that passed (0.0: even the lowest failed)
    steps: tuple[SearchStep, ...]
    converged: bool  # the bracket [passed, failed] narrowed to within the tolerance (or max passed)

    @property
    def best(self) -> SearchStep | None:
        ok = [s for s in self.steps if s.passed]
        return max(ok, key=lambda s: s.rate_bps) if ok else None


def zero_loss_search(
    measure: Callable[[float], StepOutcome | float],
    *,
    min_bps: float,
    max_bps: float,
    threshold: float = 0.001,
    max_steps: int = 8,
    tolerance: float = 0.05,
) -> SearchResult:
    """Bisect the offered rate between `min_bps` and `max_bps` for the highest one with loss <= threshold.

    Invariant: `lo` only ever holds rates that passed and `hi` rates that failed (or the ceiling), and every
    probe lies strictly between them, so the answer is monotone in the steps taken. The first probe is the
    ceiling; after the first failure the rate actually delivered is tried (it is usually just at the limit)
    and then just above it; from a pass the rate at most doubles; below a failed delivered-rate guess (the
    limit is near: it lost a little, not all) the rate at most halves; otherwise geometric midpoints (ranges
    span decades). Stops when hi/lo <= 1 + tolerance or after max_steps.

    Halving below a failed guess, not the midpoint down to `min_bps`: a tunnel whose capacity wobbles by a few
    percent fails the 0.98 guess now and then, and the midpoint of [1000, 40,000] packets/s (6,300) ended
    such a search at half its rate with the steps left (seen in 1 of 12 searches through wireguard-go).
    """
    if not 0 < min_bps <= max_bps:
        raise ValueError("need 0 < min_bps <= max_bps")
    if max_steps < 1:
        raise ValueError("max_steps must be >= 1")
    steps: list[SearchStep] = []
    lo: float | None = None
    hi = max_bps
    hinted: list[float] = []  # probes suggested by the delivered rate, tried before plain bisection
    delivered_guess: float | None = None
    near = False  # a delivered-rate guess failed: the limit is just below it
    rate = max_bps
    while True:
        out = measure(rate)
        loss, delivered = (float(out), None) if isinstance(out, int | float) else (out.loss, out.delivered_bps)
        passed = loss <= threshold
        steps.append(SearchStep(rate, loss, passed, delivered))
        if passed:
            lo = rate
            if rate >= hi:  # the ceiling itself passed
                return SearchResult(rate, tuple(steps), True)
            if len(steps) == 2 and delivered_guess == rate:  # the delivered-rate guess passed: check just above
                hinted.append(rate * (1.0 + 0.99 * tolerance))
        else:
            hi = rate
            near = near or (delivered_guess is not None and rate == delivered_guess)
            if len(steps) == 1 and delivered is not None:
                delivered_guess = delivered * 0.98
                hinted.append(delivered_guess)
        floor = lo if lo is not None else min_bps
        if lo is not None and hi / lo <= 1.0 + tolerance:
            return SearchResult(lo, tuple(steps), True)
        if lo is None and rate <= min_bps:
            return SearchResult(0.0, tuple(steps), True)  # even the floor loses too much
        if len(steps) >= max_steps:
            return SearchResult(lo or 0.0, tuple(steps), False)
        guess = hinted.pop() if hinted else None
        if guess is not None and floor < guess < hi:
            rate = guess
        elif lo is None and hi / floor <= 1.0 + tolerance:
            rate = min_bps
        elif lo is not None:
            rate = min(math.sqrt(lo * hi), 2.0 * lo)  # gallop up from a pass: the ceiling may be decades away
        elif near:
            rate = max(math.sqrt(floor * hi), hi / 2.0)  # just under a failed guess: at most halve
        else:
            rate = math.sqrt(floor * hi)


# ---- workload `udp-search` -------------------------------------------------------------------------


class UdpSearchOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sizes: list[int] = Field(default=[64, 512, 1200, 1400], min_length=1)
    loss_threshold: float = Field(default=0.001, ge=0, lt=1, description="fraction: 0.001 = 0.1%")
    min_rate: RateText = "1mbit"
    max_rate: RateText = "2gbit"
    max_steps: int = Field(default=8, ge=1, le=20)
    tolerance: float = Field(default=0.05, gt=0, le=1)
    step_s: int = Field(default=1, ge=1, le=60, description="seconds per step (iperf3 counts whole seconds)")
    socket_buffer: str = Field(default="2M", pattern=r"^([0-9]+[KMG]?)?$", description="iperf3 -w ('' = default)")

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, v: list[int]) -> list[int]:
        for s in v:
            if not 16 <= s <= 65507:
                raise ValueError(f"datagram size {s} out of range (16..65507)")
        return v


class UdpSearchWorkload(Workload[Context, UdpSearchOptions]):
    kind = "udp-search"
    description = "RFC 2544 zero-loss UDP throughput: bisection on the offered rate, per datagram size"
    axes = ("direction",)
    layers = ("l3",)
    Options = UdpSearchOptions
    one_way = True
    caption = "zero-loss throughput (RFC 2544): delivered rate at the highest offered rate with loss <= the threshold"

    @property
    def own_table(self) -> bool:
        return True

    def table_columns(self, trials: Sequence[TrialRecord]) -> list[Column]:
        """One column per datagram size found in the trials, and the search's steps."""
        sizes = sorted({int(ZERO_LOSS.values(k)["size"]) for t in trials for k in t.metrics if ZERO_LOSS.matches(k)})
        return [Column(f"{size} B Mbit/s", ZERO_LOSS.key(size=size), "mbit") for size in sizes] + [
            Column("steps", "|".join(SEARCH_STEPS.key(size=size) for size in sizes), "n")
        ]

    def headline(self, rec: TrialRecord) -> str:
        m = rec.metrics
        sizes = sorted(int(ZERO_LOSS.values(k)["size"]) for k in m if ZERO_LOSS.matches(k))
        return "zero-loss " + ", ".join(f"{s} B {mbit(m.get(ZERO_LOSS.key(size=s)))}" for s in sizes) + " Mbit/s"

    def measure(self, ctx: Context) -> Measurement:
        opts = self.opts(ctx.options)
        m = Measurement()
        log: list[dict[str, Any]] = []
        for size in opts.sizes:
            results: dict[float, UdpResult] = {}

            def step(rate: float, size: int = size, results: dict[float, UdpResult] = results) -> StepOutcome:
                # a second try: a control connection can fail while the tunnel drains the previous overload
                for last in (False, True):
                    try:
                        r = run_udp(
                            ctx, rate_bps=rate, size=size, duration_s=opts.step_s, tag=f"{size} B",
                            buffer=opts.socket_buffer,
                        ).result  # fmt: skip
                        break
                    except (TrialError, CommandFailed):
                        if last:
                            raise
                results[rate] = r
                return StepOutcome(r.loss, r.delivered_bps)

            res = zero_loss_search(
                step,
                min_bps=parse_rate(opts.min_rate),
                max_bps=parse_rate(opts.max_rate),
                threshold=opts.loss_threshold,
                max_steps=opts.max_steps,
                tolerance=opts.tolerance,
            )
            best = res.best
            carried = results[best.rate_bps].delivered_bps if best else 0.0
            m.metrics[ZERO_LOSS.key(size=size)] = carried
            m.metrics[ZERO_LOSS_OFFERED.key(size=size)] = res.rate_bps
            m.metrics[ZERO_LOSS_PPS.key(size=size)] = carried / (8 * size)
            m.metrics[SEARCH_STEPS.key(size=size)] = float(len(res.steps))
            m.metrics[SEARCH_CONVERGED.key(size=size)] = 1.0 if res.converged else 0.0
            # the sender could not offer the rate asked: the figure is iperf3's limit, not the tunnel's
            m.metrics[SENDER_LIMITED.key(size=size)] = (
                1.0 if best and results[best.rate_bps].sent_bps < SENDER_SHORT * best.rate_bps else 0.0
            )
            m.series[f"search_loss.{size}"] = [(s.rate_bps, s.loss) for s in res.steps]
            log.extend(
                {
                    "size": size,
                    "offered_bps": s.rate_bps,
                    "loss": s.loss,
                    "passed": s.passed,
                    "sent_bps": results[s.rate_bps].sent_bps,
                }
                for s in res.steps
            )
        m.artifacts["udp-search.json"] = json.dumps(log, indent=1).encode()
        return m

    def timeout_s(self, ctx: Context) -> float:
        o = self.opts(ctx.options)
        return len(o.sizes) * o.max_steps * (o.step_s + 5.0) + 10.0

    def estimate(self, case: CaseAxes, options: BaseModel, window: Window) -> float:
        o = self.opts(options)
        return len(o.sizes) * o.max_steps * (o.step_s + 0.5) + TRIAL_SETUP_S  # at most: a search may end sooner
