"""What interactive users feel, with netperf (workloads/netperf.py) or sockperf (workloads/sockperf.py): small
request/response exchanges (`rr`: TCP_RR, `udp-rr`: UDP_RR, with request and response sizes and a burst of
transactions in flight) and one new connection per transaction (`crr`: TCP_CRR, the connection rate).

Each trial runs netperf for the warm-up's seconds (discarded), then for the measured seconds: transactions
per second, the transaction time's percentiles (µs, netperf -j), and, once the trial's CPU figures are in,
the tunnel's CPU µs per transaction on each side (`derive`), so that `compare` judges the rate, p99 and the
CPU per transaction. netperf needs a control and a data connection: through an L4 proxy (a one-port
forward) the control connection goes over the underlay and the data connection through the proxy
(netperf.route), so `rr` and `crr` run through the proxies too, each of crr's connections a new one through
the proxy; `udp-rr` needs an L3 tunnel. rr and udp-rr take `generator = "sockperf"` for the p99.9: sockperf's
ping-pong keeps every round trip (one in flight, so no burst), its TCP test one connection to the target.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from tunbench.metrics import Chart, Format, MetricSpec, declare
from tunbench.metrics.core import WINDOW_S
from tunbench.monitor.cost import CPU_SYS, CPU_USER, PROCESSES
from tunbench.monitor.counters import ROLES
from tunbench.results import TrialRecord
from tunbench.units import Window, fmt
from tunbench.workloads import netperf, sockperf
from tunbench.workloads.base import TRIAL_SETUP_S, CaseAxes, Column, Context, Measurement, Workload

_US = Format(3, 1.0, " µs")
_FASTER = ("faster", "slower")
_CHEAPER = ("cheaper", "costlier")

TRANSACTIONS = declare(
    "rr.transactions_per_s", "1/s", "higher", "wide",
    "Request/response transactions completed per second over the measured window (netperf TCP_RR, UDP_RR; "
    "TCP_CRR: connections, each one transaction).",
    title="transactions/s", fmt=Format(4, 1.0, " /s"), chart=Chart("transactions/s"), words=_FASTER,
)  # fmt: skip
LATENCY_P99 = declare(
    "rr.latency_p99_us", "µs", "lower", "gate",
    "The 99th percentile of the transaction time (request sent to response received; TCP_CRR: connect "
    "included), measured window.",
    title="transaction p99", fmt=_US, chart=Chart("µs"), words=_FASTER,
)  # fmt: skip
LATENCY = declare(
    "rr.latency_{stat}_us", "µs", "lower", "info",
    "The transaction time's other figures over the measured window: p50, p90, min, mean, max, standard "
    "deviation.",
    title="transaction {stat}", fmt=_US, chart=Chart("µs"), words=_FASTER,
    choices={"stat": ("p50", "p90", "min", "mean", "max", "stddev")},
)  # fmt: skip
LATENCY_P999 = declare(
    "rr.latency_p999_us", "µs", "lower", "gate",
    "The 99.9th percentile of the transaction time over the measured window, with generator = \"sockperf\" "
    "(netperf has none): the round trip at rank 0.999·N of N, left out below 1,000 transactions.",
    title="transaction p99.9", fmt=_US, chart=Chart("µs"), words=_FASTER,
)  # fmt: skip
LATENCY_STEP = declare(
    "rr.latency_p99_step_us", "µs", "none", "info",
    "The width of netperf's histogram bucket that holds the p99: netperf's percentiles are interpolated within "
    "buckets of 1% of their decade (1 µs from 10 µs, 10 µs from 100 µs, 10 ms from 100 ms), so a change smaller "
    "than this is not seen.",
)  # fmt: skip
CPU_PER_TX = declare(
    "rr.cpu_us_per_tx", "µs", "lower", "gate",
    "The tunnel's CPU µs per transaction, both sides together, over the measured window (the traffic "
    "generator's own CPU is not in it).",
    title="CPU/transaction tunnel", fmt=_US, chart=Chart("µs/transaction"), words=_CHEAPER,
)  # fmt: skip
CPU_PER_TX_SIDE = declare(
    "rr.cpu_us_per_tx.{role}", "µs", "lower", "wide",
    "One side's tunnel CPU µs per transaction over the measured window.",
    title="CPU/transaction {role}", fmt=_US, chart=Chart("µs/transaction"), words=_CHEAPER,
)  # fmt: skip
FIGURE = declare(
    "rr.{figure}", "", "none", "info",
    "The test as netperf ran it: transactions in the measured window, its elapsed seconds, request and "
    "response bytes, burst (transactions in flight beyond the first), the client's TCP retransmits.",
    choices={"figure": ("transactions", "elapsed_s", "request_bytes", "response_bytes", "burst", "retransmits")},
)  # fmt: skip


def bucket_us(value_us: float) -> float:
    """The width of the bucket of netperf's histogram that holds `value_us` (netlib.c's HIST_add: 100 buckets
    per decade from 1 µs, 0.1 µs below 10 µs)."""
    return 10.0 ** math.floor(math.log10(value_us)) / 10.0 if value_us >= 10.0 else 0.1


def one_bucket(a_us: float, b_us: float) -> bool:
    """Whether two of netperf's estimates, a <= b, lie in one bucket of its histogram (an estimate on a
    bucket's upper edge, as the interpolation gives for the last transaction in it, counts as inside)."""
    w = bucket_us(a_us)
    lo = math.floor(a_us / w) * w
    return b_us <= lo + w * (1 + 1e-9)


def _outside(latency_us: dict[str, float]) -> list[str]:
    lo, hi = latency_us.get("min"), latency_us.get("max")
    return [
        q
        for q in ("p50", "p90", "p99")
        if (v := latency_us.get(q)) is not None and ((lo is not None and v < lo) or (hi is not None and v > hi))
    ]


def _shared_bucket_us(latency_us: dict[str, float]) -> float | None:
    """The width of the one histogram bucket that holds p50 to p99, when they share one (None otherwise)."""
    p50, p99 = latency_us.get("p50"), latency_us.get("p99")
    if p50 is not None and p99 is not None and p50 <= p99 and one_bucket(p50, p99):
        return bucket_us(p50)
    return None


def resolved(latency_us: dict[str, float]) -> tuple[dict[str, float | None], list[str]]:
    """netperf's figures with each percentile it could not resolve left out (pure), and which those were.
    netperf interpolates a percentile linearly inside the histogram bucket that holds it (netlib.c's
    HIST_search_bucket). Where p50 to p99 all fall in one bucket, the three are that bucket's interpolation by
    rank and say only "in [a, a + w)": across 100 ms of RTT, every transaction took 100.2-100.8 ms and
    netperf gave p50 = 105.1 ms, p90 = 109.1 ms and p99 = 110 ms, whatever the tunnel. The estimate can even
    lie outside what was seen (a p50 of 104.8 ms above a largest time of 100.8 ms). Neither is a
    measurement, and neither would be the minimum or maximum put in its place: such percentiles are left out
    (None), and the minimum, mean and maximum, which are exact, stay."""
    given = [q for q in ("p50", "p90", "p99") if latency_us.get(q) is not None]
    unresolved = given if _shared_bucket_us(latency_us) is not None else _outside(latency_us)
    out: dict[str, float | None] = dict(latency_us)
    for q in unresolved:
        out[q] = None
    return out, unresolved


def unresolved_note(unresolved: list[str], latency_us: dict[str, float]) -> str:
    """Why a test's percentiles are missing, for the trial's params (empty when none are)."""
    if not unresolved:
        return ""
    why = "netperf's estimate fell outside the times it saw" if _outside(latency_us) else ""
    if (width := _shared_bucket_us(latency_us)) is not None:
        where = f"p50 to p99 in one bucket of its histogram, {fmt_ms(width)} wide"
        why = f"{why} ({where})" if why else f"netperf's estimates are its interpolation by rank ({where})"
    return f"{', '.join(unresolved)} not resolved: {why}; min, mean and max are exact"


def fmt_ms(us: float) -> str:
    return f"{us / 1000:g} ms" if us >= 1000 else f"{us:g} µs"


def result_metrics(r: netperf.NetperfResult) -> dict[str, float | None]:
    """One measured test's figures under their declared keys (pure), a percentile netperf could not resolve
    left out (`resolved`)."""
    lat, _ = resolved(r.latency_us)
    m: dict[str, float | None] = {TRANSACTIONS.name: r.transactions_per_s, LATENCY_P99.name: lat.get("p99")}
    for stat in dict(LATENCY.choices)["stat"]:
        m[LATENCY.key(stat=stat)] = lat.get(stat)
    step_at = lat.get("p99") or lat.get("max")
    m[LATENCY_STEP.name] = bucket_us(step_at) if step_at else None
    m[FIGURE.key(figure="transactions")] = r.transactions
    m[FIGURE.key(figure="elapsed_s")] = r.elapsed_s
    m[FIGURE.key(figure="request_bytes")] = float(r.request_bytes)
    m[FIGURE.key(figure="response_bytes")] = float(r.response_bytes)
    m[FIGURE.key(figure="burst")] = float(r.burst)
    m[FIGURE.key(figure="retransmits")] = float(r.retransmits) if r.retransmits is not None else None
    return m


P999_MIN_TRANSACTIONS = 1000
"""The fewest transactions for a p99.9: below 1,000 the sample at rank round(0.999·N) is the largest one
(sockperf's printPercentiles), which `max` already holds."""


def sockperf_metrics(r: sockperf.SockperfResult, message_bytes: int) -> dict[str, float | None]:
    """One measured ping-pong test's figures under rr's keys (pure): sockperf's percentiles are samples, not
    interpolations, so none is left out but a p99.9 on fewer than P999_MIN_TRANSACTIONS transactions; no
    histogram step, no retransmit count; the request and the response are one message of `message_bytes`."""
    lat = r.latency_us
    p999 = lat.get("p999") if r.received >= P999_MIN_TRANSACTIONS else None
    m: dict[str, float | None] = {TRANSACTIONS.name: r.transactions_per_s, LATENCY_P99.name: lat.get("p99")}
    m[LATENCY_P999.name] = p999
    for stat in dict(LATENCY.choices)["stat"]:
        m[LATENCY.key(stat=stat)] = lat.get(stat)
    m[FIGURE.key(figure="transactions")] = r.transactions
    m[FIGURE.key(figure="elapsed_s")] = r.elapsed_s
    m[FIGURE.key(figure="request_bytes")] = float(message_bytes)
    m[FIGURE.key(figure="response_bytes")] = float(message_bytes)
    m[FIGURE.key(figure="burst")] = 0.0
    return m


def cpu_per_transaction(metrics: dict[str, float | None]) -> dict[str, float | None]:
    """The tunnel's CPU µs per transaction on each side and both together (pure): a side's CPU seconds over
    the measured window (user + system, the trial's per-role figures) over the transactions in that window
    (the rate times the window's seconds), as iperf3's CPU per bit divides by its bits. A side without tunnel
    processes (direct, a kernel tunnel) has none; the total is over the sides that have one."""
    rate, window = metrics.get(TRANSACTIONS.name), metrics.get(WINDOW_S.name)
    out: dict[str, float | None] = {}
    if not rate or not window:
        return out
    sides = []
    for role in ROLES:
        user, sys_ = metrics.get(CPU_USER.key(role=role)), metrics.get(CPU_SYS.key(role=role))
        if not metrics.get(PROCESSES.key(role=role)) or (user is None and sys_ is None):
            continue
        per_tx = 1e6 * ((user or 0.0) + (sys_ or 0.0)) / (rate * window)
        out[CPU_PER_TX_SIDE.key(role=role)] = per_tx
        sides.append(per_tx)
    if sides:
        out[CPU_PER_TX.name] = sum(sides)
    return out


class SizeOptions(BaseModel):
    """A transaction's sizes (netperf -r), as every request/response workload takes them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request_bytes: int = Field(default=1, ge=1, le=65000, description="bytes of each request (netperf -r)")
    response_bytes: int = Field(default=1, ge=1, le=65000, description="bytes of each response (netperf -r)")

    def in_flight(self) -> int:
        """Transactions in flight beyond the first (netperf -b): none, one transaction at a time."""
        return 0


Generator = Literal["netperf", "sockperf"]


class RrOptions(SizeOptions):
    burst: int = Field(
        default=0,
        ge=0,
        le=256,
        description="transactions in flight beyond the first (netperf -b; 0: one at a time, a lone user's "
        "keystrokes; more: a pipelining client)",
    )
    generator: Generator = Field(
        default="netperf",
        description="the traffic generator: netperf (TCP_RR, UDP_RR; p50/p90/p99 from its histogram) or "
        "sockperf (ping-pong: every round trip kept, p99.9 too; one transaction in flight, request and response "
        "of one size, IPv4 only)",
    )

    @field_validator("generator")
    @classmethod
    def _sockperf_can(cls, generator: Generator, info: ValidationInfo) -> Generator:
        """What sockperf's ping-pong cannot do is refused here, before a run: its client sends a message and
        waits for its echo before the next (one in flight; its own -b sends N messages in a row each cycle,
        not netperf's N transactions kept in flight), and its server echoes each message at the size it
        came."""
        if generator != "sockperf":
            return generator
        burst, req, resp = (info.data.get(k) for k in ("burst", "request_bytes", "response_bytes"))
        if burst:
            raise ValueError(
                f"sockperf's ping-pong keeps one transaction in flight: burst = {burst} needs generator = "
                '"netperf" (or burst = 0)'
            )
        if req is not None and resp is not None and req != resp:
            raise ValueError(
                f"sockperf echoes each message at the size it came: request_bytes ({req}) and response_bytes "
                f'({resp}) must be equal with generator = "sockperf"'
            )
        return generator

    def in_flight(self) -> int:
        return self.burst

    def message_bytes(self) -> int:
        """sockperf's message (request and echo): the sizes asked for, at least its 14-byte header."""
        return max(self.request_bytes, sockperf.MIN_MESSAGE_BYTES)


COLUMNS = (
    Column("transactions/s", TRANSACTIONS.name, "n"),
    Column("p50 µs", LATENCY.key(stat="p50"), "us"),
    Column("p90", LATENCY.key(stat="p90"), "us"),
    Column("p99", LATENCY_P99.name, "us"),
    Column("p99.9", LATENCY_P999.name, "us"),
    Column("max", LATENCY.key(stat="max"), "us"),
    Column("CPU µs/tx (client / server)", "|".join(CPU_PER_TX_SIDE.key(role=r) for r in ROLES), "us"),
)


class NetperfWorkload(Workload[Context, SizeOptions]):
    """A netperf request/response test as a workload: a netserver per trial, a warm-up test (discarded),
    then the measured test."""

    test: ClassVar[netperf.Test]
    # how long its netperf takes to exit after its test's seconds (TCP_CRR: netperf's PAD_TIME, 4 s;
    # measured_window says why)
    exit_lag_s: ClassVar[float] = 0.0
    requires = ("netperf", "netserver")
    axes = ()
    layers: ClassVar[tuple[str, ...]] = ("l3", "l4")  # through an L4 proxy: its data connection (netperf.route)
    columns = COLUMNS
    compared: ClassVar[tuple[tuple[MetricSpec, str], ...]] = (
        (TRANSACTIONS, "throughput"),
        (LATENCY_P99, "latency"),
        (LATENCY_P999, "latency"),
        (CPU_PER_TX, "cpu"),
        (CPU_PER_TX_SIDE, "cpu"),
    )

    def programs(self, options: BaseModel | None) -> tuple[str, ...]:
        return ("sockperf",) if self.uses_sockperf(options) else self.requires

    @staticmethod
    def uses_sockperf(options: BaseModel | None) -> bool:
        return isinstance(options, RrOptions) and options.generator == "sockperf"

    def headline(self, rec: TrialRecord) -> str:
        m = rec.metrics
        rate = m.get(TRANSACTIONS.name)
        p50, p99, p999 = m.get(LATENCY.key(stat="p50")), m.get(LATENCY_P99.name), m.get(LATENCY_P999.name)
        if p50 is None or p99 is None:  # netperf could not resolve them (resolved): the exact mean instead
            mean = m.get(LATENCY.key(stat="mean"))
            return f"{fmt(rate, 'n')} transactions/s, mean {fmt(mean, 'us')} µs (percentiles not resolved)"
        tail = f", p99.9 {fmt(p999, 'us')} µs" if p999 is not None else ""
        return f"{fmt(rate, 'n')} transactions/s, p50 {fmt(p50, 'us')} µs, p99 {fmt(p99, 'us')} µs{tail}"

    def params(self, ctx: Context, duration_s: int) -> netperf.NetperfParams:
        o = self.opts(ctx.options)
        return netperf.NetperfParams(
            test=self.test,
            duration_s=duration_s,
            request_bytes=o.request_bytes,
            response_bytes=o.response_bytes,
            burst=o.in_flight(),
        )

    def proto(self) -> sockperf.Proto:
        return "udp" if self.test == "UDP_RR" else "tcp"

    def prepare(self, ctx: Context, stack: contextlib.ExitStack) -> None:
        if self.uses_sockperf(ctx.options):
            stack.enter_context(sockperf.SockperfServer(ctx, self.proto()))
        else:
            stack.enter_context(netperf.Netserver(ctx))

    def measure_sockperf(self, ctx: Context, o: RrOptions) -> Measurement:
        """The ping-pong test as netperf's is run: a warm-up test whose figures are not kept, then the measured
        one; its window is sockperf's valid duration, placed back from its exit (sockperf.END_S): its test
        starts about 2 s after its launch (sockperf.START_S), so a launch anchor would be off by that."""
        artifacts: dict[str, bytes] = {}
        size = o.message_bytes()
        if ctx.window.omit_s:
            _, out = sockperf.run_client(ctx, sockperf.SockperfParams(self.proto(), ctx.window.omit_s, size), "warm-up")
            artifacts["sockperf-warmup.txt"] = out.encode()
        measured = sockperf.SockperfParams(self.proto(), ctx.window.duration_s, size)
        r, out = sockperf.run_client(ctx, measured, "measured")
        artifacts["sockperf.txt"] = out.encode()
        m = Measurement(artifacts=artifacts, window=sockperf_window(r, time.monotonic()))
        m.metrics.update(sockperf_metrics(r, size))
        m.params["generator"] = {"program": "sockperf", "test": "ping-pong", "proto": self.proto()}
        if m.metrics[LATENCY_P999.name] is None:
            m.params["rr_percentiles"] = (
                f"p99.9 left out: {r.received} transactions, fewer than {P999_MIN_TRANSACTIONS} (it would be the "
                "largest, kept as max)"
            )
        return m

    def measure(self, ctx: Context) -> Measurement:
        o = self.opts(ctx.options)
        if isinstance(o, RrOptions) and o.generator == "sockperf":
            return self.measure_sockperf(ctx, o)
        artifacts: dict[str, bytes] = {}
        if ctx.window.omit_s:  # the warm-up: its own test, whose figures are not kept
            _, out = netperf.run_client(ctx, self.params(ctx, ctx.window.omit_s), "warm-up")
            artifacts["netperf-warmup.txt"] = out.encode()
        launched = time.monotonic()
        r, out = netperf.run_client(ctx, self.params(ctx, ctx.window.duration_s), "measured")
        artifacts["netperf.txt"] = out.encode()
        m = Measurement(artifacts=artifacts, window=measured_window(r, launched))
        m.metrics.update(result_metrics(r))
        m.params["generator"] = {"program": "netperf", "test": self.test}
        if note := unresolved_note(resolved(r.latency_us)[1], r.latency_us):
            m.params["rr_percentiles"] = note
        return m

    def estimate(self, case: CaseAxes, options: BaseModel, window: Window) -> float:
        """The trial's wall clock: its windows and set-up, and what each netperf run takes after its test
        (`exit_lag_s`): the warm-up's test and the measured one; a sockperf run's wait before its test, its extra
        second and its exit (workloads/sockperf.py)."""
        runs = 2 if window.omit_s else 1
        lag = sockperf.EXTRA_S + sockperf.START_S + sockperf.END_S if self.uses_sockperf(options) else self.exit_lag_s
        return window.total_s + TRIAL_SETUP_S + runs * lag

    def derive(self, metrics: dict[str, float | None]) -> dict[str, float | None]:
        return cpu_per_transaction(metrics)


def measured_window(r: netperf.NetperfResult, launched: float) -> tuple[float, float]:
    """The measured seconds of a netperf test on the monotonic clock, anchored at its launch: its control
    connection and the test's set-up come first (taken as two of its fastest transactions, each at least
    one round trip), then its elapsed seconds. Not at its exit, as iperf3's window is (workloads/iperf3.py):
    a TCP_CRR test's netperf exits about 4 s after its elapsed seconds end, while a TCP_RR's exits within
    milliseconds of them: netserver's side of a connection-per-transaction test waits in accept() for the
    next connection until its own timer runs out, set to the test's length plus netperf's PAD_TIME of 4 s
    (nettest_omni.c's recv_omni, netlib.h; measured here with Debian's 2.7.0)."""
    start = launched + 2.0 * r.latency_us.get("min", 0.0) / 1e6
    return start, start + r.elapsed_s


def sockperf_window(r: sockperf.SockperfResult, exited: float) -> tuple[float, float]:
    """The measured seconds of a sockperf ping-pong on the monotonic clock, anchored at its exit: its valid
    duration ends its cool-down and its summary before (sockperf.END_S). Not at its launch: it waits 2 s
    after its warm-up messages before its test starts (sockperf.START_S), so a launch anchor held 1.6 s
    without traffic and missed as much of it (the tunnel's CPU per transaction read 34-36 µs where the
    netperf runs alternated with them read 50-57 µs)."""
    end = exited - sockperf.END_S
    return end - r.elapsed_s, end


class RrWorkload(NetperfWorkload):
    kind = "rr"
    description = (
        "TCP request/response (netperf TCP_RR, or sockperf's ping-pong for p99.9), also through the L4 proxies: "
        "transactions/s, p50/p90/p99(/p99.9) µs, CPU µs per transaction"
    )
    test = "TCP_RR"
    Options = RrOptions
    optional = (("sockperf", 'generator = "sockperf"'),)


class UdpRrWorkload(NetperfWorkload):
    kind = "udp-rr"
    description = (
        "UDP request/response (netperf UDP_RR, or sockperf's ping-pong for p99.9): transactions/s, "
        "p50/p90/p99(/p99.9) µs, CPU µs per transaction"
    )
    test = "UDP_RR"
    layers = ("l3",)
    Options = RrOptions
    optional = (("sockperf", 'generator = "sockperf"'),)


class CrrWorkload(NetperfWorkload):
    kind = "crr"
    description = (
        "a new TCP connection per transaction (netperf TCP_CRR), also through the L4 proxies (a new proxied "
        "connection each): connections/s, connect+transaction p50/p99 µs, CPU µs per connection"
    )
    test = "TCP_CRR"
    exit_lag_s = 4.0
    Options = SizeOptions
