"""iperf3 bulk TCP: argv builders and a pure parser of its JSON output.

The headline is the receiver's byte count (what actually arrived), excluding the --omit warm-up.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tunbench.errors import RetryTrial, TrialError
from tunbench.host.place import Place, Proc
from tunbench.metrics import core, declare
from tunbench.monitor.cost import CPU_SYS, CPU_USER
from tunbench.results import TrialRecord
from tunbench.units import mbit, parse_rate
from tunbench.workloads.base import CaseAxes, Context, Generator, Measurement, Workload

GENERATOR_BOUND = declare(
    "iperf3.generator_bound", "flag", "none", "info", "1 when iperf3 itself was the bottleneck (a side's CPU >= 90%)."
)
GENERATOR_CPU = declare("iperf3.cpu.{role}_pct", "%", "none", "info", "iperf3's own CPU on a side, as it reports it.")
PAYLOAD = declare(
    "iperf3.bytes.{direction}",
    "bytes",
    "none",
    "info",
    "Payload bytes iperf3 received in a direction, measured window.",
)
SENT_TOTAL = declare(
    "iperf3.sent_bytes_total.{direction}", "bytes", "none", "info",
    "Bytes iperf3 sent in a direction over the whole test, warm-up included (what `delivered_bytes` sums).",
)  # fmt: skip
CWND_MAX = declare(
    "snd_cwnd_max_bytes", "bytes", "none", "info", "The largest congestion window iperf3 saw (sender side)."
)
DURATION = declare(
    "iperf3_duration_s", "s", "none", "info",
    "The seconds iperf3's receiver summed its result over (its end summary, the omitted warm-up left out).",
)  # fmt: skip

Direction = Literal["up", "down", "bidir"]
DIRECTIONS: tuple[Direction, ...] = ("up", "down", "bidir")


@dataclass(frozen=True)
class Iperf3Params:
    """One iperf3 client's test. Every iperf3 tunbench runs (TCP and UDP, one client or N) is built here."""

    flows: int = 1
    direction: Direction = "up"
    duration_s: float = 10.0
    omit_s: float = 1.0
    connect_timeout_ms: int = 3000
    protocol: Literal["tcp", "udp"] = "tcp"
    # UDP: the offered rate (iperf3's default, 1 Mbit/s, is never used); TCP: a fixed offered load per
    # stream (-b), None = as fast as it goes
    rate_bps: float | None = None
    length: int | None = None  # UDP: datagram payload bytes
    buffer: str = ""  # socket buffer at both ends (-w), e.g. "2M"
    interval_s: float | None = None  # per-interval reports
    server_output: bool = False  # carry the server's (receiver-side) JSON in the client's output
    logfile: str | None = None  # JSON to this file instead of stdout

    @property
    def timeout_s(self) -> float:
        """How long before a silent iperf3 is declared hung: the test plus generous set-up slack."""
        return self.duration_s + self.omit_s + 10.0


def server_argv(port: int, *, json: bool = False) -> list[str]:
    # -1: serve exactly one test, then exit; --rcv-timeout bounds a client that disappears mid-test;
    # -J: a client's --get-server-output then carries the server's intervals as JSON
    return ["iperf3", "-s", "-1", *(["-J"] if json else []), "-p", str(port), "--rcv-timeout", "15000"]


def client_argv(address: str, port: int, p: Iperf3Params) -> list[str]:
    argv = ["iperf3", "-c", address, "-p", str(port), "-J", "-t", f"{p.duration_s:g}"]
    if p.omit_s:
        argv += ["-O", f"{p.omit_s:g}"]
    if p.flows != 1:
        argv += ["-P", str(p.flows)]
    if p.protocol == "udp":
        if p.rate_bps is None or p.length is None:
            raise ValueError("a UDP test needs its rate and datagram length")
        argv += ["-u", "-b", str(int(p.rate_bps)), "-l", str(p.length)]
    elif p.rate_bps is not None:
        argv += ["-b", str(int(p.rate_bps))]
    argv += ["--connect-timeout", str(p.connect_timeout_ms)]
    if p.interval_s is not None:
        argv += ["-i", f"{p.interval_s:g}"]
    if p.server_output:
        argv.append("--get-server-output")
    if p.logfile:
        argv += ["--logfile", p.logfile]
    if p.buffer:
        argv += ["-w", p.buffer]
    if p.direction == "down":
        argv.append("-R")
    elif p.direction == "bidir":
        argv.append("--bidir")
    return argv


@dataclass(frozen=True)
class StreamResult:
    stream: int
    direction: str  # "up" (client -> server) or "down"
    received_bps: float
    retransmits: int | None


@dataclass(frozen=True)
class IntervalPoint:
    t_s: float  # end of the interval, seconds since the test start (warm-up excluded)
    bps: float
    direction: str


@dataclass(frozen=True)
class Iperf3Result:
    throughput_bps: float  # receiver side, sum over streams (and over both directions for bidir)
    up_bps: float | None
    down_bps: float | None
    retransmits: int | None
    duration_s: float
    streams: list[StreamResult] = field(default_factory=list)
    intervals: list[IntervalPoint] = field(default_factory=list)
    snd_cwnd_max_bytes: int | None = None
    version: str = ""
    # streams whose sender moved bytes while the receiver saw none: in a --bidir test, iperf3's role race
    silent_streams: int = 0
    # per direction ("up"/"down"): bytes received in the measured seconds, and an upper bound of what the
    # sender put on the wire over the whole test (warm-up included): the interface cross-checks use both
    received_bytes: dict[str, float] = field(default_factory=dict)
    sent_bytes_total: dict[str, float] = field(default_factory=dict)
    # iperf3's own CPU use (% of one core, its end.cpu_utilization_percent): the client's and the server's
    cpu_client_pct: float | None = None
    cpu_server_pct: float | None = None
    min_rtt_s: float | None = None  # the smallest TCP RTT any stream's sender saw (the path's base RTT)


def _stream_dir(stream: dict[str, Any], default: str) -> str:
    sender = stream.get("sender", {}) or {}
    # in bidir tests iperf3 marks each stream with `sender: true/false` from the client's view
    flag = sender.get("sender")
    if flag is None:
        return default
    return "up" if flag else "down"


def load_json(text: str) -> dict[str, Any]:
    """iperf3's -J document; its own error, or output that is not JSON, is a TrialError."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise TrialError(f"iperf3 printed no valid JSON ({e}): {text[:200]!r}") from e
    if not isinstance(doc, dict):
        raise TrialError(f"iperf3 printed JSON that is not an object: {text[:200]!r}")
    if doc.get("error"):
        raise TrialError(f"iperf3: {doc['error']}")
    return doc


def parse(text: str, direction: Direction) -> Iperf3Result:
    doc = load_json(text)
    end = doc.get("end") or {}
    if "sum_received" not in end:
        raise TrialError("iperf3 JSON has no end.sum_received (test did not complete)")
    default_dir = "down" if direction == "down" else "up"
    first = end["sum_received"]
    up_bps: float | None
    down_bps: float | None
    received: dict[str, float] = {}
    sent: dict[str, float] = {}
    if direction == "bidir":
        reverse = end.get("sum_received_bidir_reverse")
        if not isinstance(reverse, dict) or "bits_per_second" not in reverse:
            # the reverse direction's result is missing: its throughput is unknown, not 0
            raise TrialError("iperf3 --bidir JSON has no end.sum_received_bidir_reverse (reverse direction lost)")
        up_bps = float(first["bits_per_second"])
        down_bps = float(reverse["bits_per_second"])
        total = up_bps + down_bps
        received = {"up": float(first.get("bytes", 0)), "down": float(reverse.get("bytes", 0))}
        sent = {
            "up": float((end.get("sum_sent") or {}).get("bytes", 0)),
            "down": float((end.get("sum_sent_bidir_reverse") or {}).get("bytes", 0)),
        }
    else:
        total = float(first["bits_per_second"])
        up_bps, down_bps = (total, None) if direction == "up" else (None, total)
        received = {default_dir: float(first.get("bytes", 0))}
        sent = {default_dir: float((end.get("sum_sent") or {}).get("bytes", 0))}
    retrans = _retransmits(end)
    streams = []
    silent = 0
    for i, s in enumerate(end.get("streams", [])):
        recv = s.get("receiver") or {}
        snd = s.get("sender") or {}
        silent += int(snd.get("bytes", 0)) > 0 and int(recv.get("bytes", 0)) == 0
        streams.append(
            StreamResult(
                stream=int(recv.get("socket", snd.get("socket", i))),
                direction=_stream_dir(s, default_dir),
                received_bps=float(recv.get("bits_per_second", 0.0)),
                retransmits=snd.get("retransmits"),
            )
        )
    intervals = []
    t_base: float | None = None
    omitted: dict[str, float] = {}
    for iv in doc.get("intervals", []):
        for key, d in (("sum", default_dir), ("sum_bidir_reverse", "down")):
            s = iv.get(key)
            if s and s.get("omitted"):
                omitted[d] = omitted.get(d, 0.0) + float(s.get("bytes", 0))
            if not s or s.get("omitted"):
                continue
            if t_base is None:
                t_base = float(s["start"])
            intervals.append(IntervalPoint(float(s["end"]) - t_base, float(s["bits_per_second"]), d))
    cwnd = [int(st["snd_cwnd"]) for iv in doc.get("intervals", []) for st in iv.get("streams", []) if "snd_cwnd" in st]
    cpu = end.get("cpu_utilization_percent") or {}
    rtts = [int(st["sender"]["min_rtt"]) for st in end.get("streams", []) if (st.get("sender") or {}).get("min_rtt")]
    return Iperf3Result(
        throughput_bps=total,
        up_bps=up_bps,
        down_bps=down_bps,
        retransmits=retrans,
        duration_s=float(first.get("seconds", 0.0)),
        streams=streams,
        intervals=intervals,
        snd_cwnd_max_bytes=max(cwnd) if cwnd else None,
        version=str(doc.get("start", {}).get("version", "")),
        silent_streams=silent,
        received_bytes=received,
        sent_bytes_total={d: omitted.get(d, 0.0) + max(b, received.get(d, 0.0)) for d, b in sent.items()},
        cpu_client_pct=_num(cpu.get("host_total")),
        cpu_server_pct=_num(cpu.get("remote_total")),
        min_rtt_s=min(rtts) / 1e6 if rtts else None,
    )


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) else None


def check_roles(r: Iperf3Result) -> None:
    """Raise RetryTrial when a --bidir test's streams crossed roles (its numbers would be void). iperf3 gives
    each data connection its role by accept() order on the server, so when connections arrive out of order
    (through a proxy that connects on its own) both ends of a stream send (and stall) or both wait: the
    sender side moved bytes, the receiver side saw none."""
    if crossed := r.silent_streams:
        raise RetryTrial(
            f"iperf3 --bidir: on {crossed} stream(s) one end sent and the other received nothing: iperf3's "
            "stream-role race when connections reach the server out of order (esnet/iperf#2029, fixed "
            "upstream by esnet/iperf#2030; an L4 proxy makes it likely), or the tunnel carried nothing that way"
        )


def _retransmits(end: dict[str, Any]) -> int | None:
    # with -R the client is the receiver; the server's retransmits arrive in sum_sent too (3.7+)
    vals = [end.get(k, {}).get("retransmits") for k in ("sum_sent", "sum_sent_bidir_reverse")]
    nums = [int(v) for v in vals if v is not None]
    return sum(nums) if nums else None


class Iperf3Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rate: str = Field(
        default="",
        description="a fixed offered load for all flows together (e.g. 200mbit): the tunnel's CPU cost at that "
        "load, steadier than throughput at saturation ('' = as fast as it goes)",
    )
    baseline_processes: int = Field(
        default=0,
        ge=0,
        le=16,
        description="iperf3 processes for the direct baseline (0 = one per CPU, at most 4): one iperf3 process "
        "sends from one thread (before 3.16, all its streams), which on a small host is the limit of a "
        "direct path, not the path; the tunnels keep one process",
    )

    @field_validator("rate")
    @classmethod
    def _rate(cls, v: str) -> str:
        if v:
            parse_rate(v)  # raises ValueError with the reason
        return v


# iperf3 (before 3.16) runs every stream in one thread: at this share of a core its own process, not the
# tunnel, may be what limits the throughput
GENERATOR_BOUND_PCT = 90.0

# the names iperf3's own figures are stored under (Workload.generator): the report and the cross-checks
# read them from here
GENERATOR = Generator(
    program="iperf3",
    bound=GENERATOR_BOUND.name,
    cpu=(GENERATOR_CPU.key(role="client"), GENERATOR_CPU.key(role="server")),
    hint="iperf3 before 3.16 runs every stream in one thread; with iperf3 >= 3.16 (one thread per stream) "
    "first in PATH, use --flows 2 or more",
    payload_bytes=PAYLOAD.name,  # a family by {direction}: Generator.byte_keys fills it in
    sent_bytes=SENT_TOTAL.name,
)


class Iperf3Workload(Workload[Context, Iperf3Options]):
    """Bulk TCP with iperf3: a fresh one-test server per trial, receiver-side bytes as the headline."""

    kind = "iperf3"
    description = "bulk TCP throughput (iperf3), flows x direction; or its CPU cost at a fixed load (rate=)"
    Options = Iperf3Options
    generator = GENERATOR

    def title(self, case: CaseAxes) -> str:
        """The default workload goes unnamed: 'up · 4 flows'."""
        return super().title(case).removeprefix(f"{self.kind} · ")

    def params(self, ctx: Context) -> Iperf3Params:
        rate = self.opts(ctx.options).rate
        return Iperf3Params(
            flows=ctx.flows,
            direction=ctx.direction,  # type: ignore[arg-type]
            duration_s=ctx.window.duration_s,
            omit_s=ctx.window.omit_s,
            rate_bps=parse_rate(rate) / ctx.flows if rate else None,  # -b is per stream
        )

    def headline(self, rec: TrialRecord) -> str:
        """At a fixed load the cost is the result: CPU-seconds per GB on each side."""
        m = rec.metrics
        if rec.params.get("workload", {}).get("rate"):
            bps, window = m.get(core.THROUGHPUT.name), m.get(core.WINDOW_S.name)
            cost = []
            for role in ("client", "server"):
                user, sys_ = m.get(CPU_USER.key(role=role)), m.get(CPU_SYS.key(role=role))
                gb = bps * window / 8e9 if bps and window else None
                cost.append(f"{((user or 0.0) + (sys_ or 0.0)) / gb:.2f}" if gb and user is not None else "–")
            return f"{mbit(bps or 0.0)} Mbit/s at a fixed load, CPU-s per GB {' / '.join(cost)} (client / server)"
        return super().headline(rec)

    def processes(self, ctx: Context) -> int:
        """How many iperf3 processes generate the traffic: one for a tunnel; for the direct baseline at full
        speed, `baseline_processes` (0: one per online CPU, at most 4)."""
        opts = self.opts(ctx.options)
        if not ctx.baseline or opts.rate:
            return 1
        return opts.baseline_processes or min(4, len(os.sched_getaffinity(0)))

    def prepare(self, ctx: Context, stack: contextlib.ExitStack) -> None:
        for i in range(self.processes(ctx)):
            port = ctx.server_port + i
            name = "iperf3-server.log" if i == 0 else f"iperf3-server-{i}.log"
            server = ctx.server.spawn(server_argv(port), what="iperf3 server", log_name=name)
            stack.callback(server.stop)
            wait_listening(ctx.server, port, server)

    def measure(self, ctx: Context) -> Measurement:
        p = self.params(ctx)
        if (k := self.processes(ctx)) > 1:
            return self._measure_parallel(ctx, p, k)
        launched = time.monotonic()
        res = ctx.client.run(
            client_argv(ctx.target.address, ctx.target.port, p),
            timeout_s=p.timeout_s,
            check=False,
            what=f"iperf3 client ({ctx.title})",
        )
        exited = time.monotonic()
        if res.returncode != 0 and not res.stdout.strip().startswith("{"):
            raise TrialError(f"iperf3 client exit {res.returncode}: {(res.stderr or res.stdout).strip()[-400:]}")
        r = parse(res.stdout, p.direction)
        if p.direction == "bidir":
            check_roles(r)
        artifacts = {"iperf3.json": res.stdout.encode()}
        return measurement(r, artifacts, measured_window(r, launched, exited), processes=1, flows=p.flows)

    def _measure_parallel(self, ctx: Context, p: Iperf3Params, k: int) -> Measurement:
        """The baseline's traffic from `k` iperf3 processes at once (each to its own server), the flows
        spread over them (at least one each): their receiver-side results summed into one."""
        flows = [p.flows // k + (1 if i < p.flows % k else 0) for i in range(k)]
        flows = [max(1, f) for f in flows]
        launched = time.monotonic()
        procs = []
        exits: list[float | None] = []
        try:
            for i, f in enumerate(flows):
                one = dataclasses.replace(p, flows=f, logfile=f"iperf3-{i}.json")  # relative to its workdir
                argv = client_argv(ctx.target.address, ctx.target.port + i, one)
                what = f"iperf3 client {i + 1}/{k} ({ctx.title})"
                procs.append(ctx.client.spawn(argv, what=what, log_name=f"iperf3-client-{i}.log"))
            exits = ctx.client.wait_exits(procs, p.timeout_s)
        finally:
            for i, proc in enumerate(procs):  # those that did not exit (a place forgets one that did)
                if i >= len(exits) or exits[i] is None:
                    proc.stop()
        exited = time.monotonic()
        texts = [(ctx.client.read(f"iperf3-{i}.json") or b"").decode(errors="replace") for i in range(k)]
        for i, (proc, t) in enumerate(zip(procs, texts, strict=True)):
            if exits[i] is None:
                raise TrialError(f"iperf3 client {i + 1}/{k} still running after {p.timeout_s:g} s")
            if proc.returncode() not in (0, None) and not t.strip().startswith("{"):
                detail = (t.strip() or proc.log_tail(5))[-400:]
                raise TrialError(f"iperf3 client {i + 1}/{k} exit {proc.returncode()}: {detail}")
        r = merge([parse(t, p.direction) for t in texts])
        if p.direction == "bidir":
            check_roles(r)
        artifacts = {f"iperf3-{i}.json": t.encode() for i, t in enumerate(texts)}
        return measurement(r, artifacts, measured_window(r, launched, exited), processes=k, flows=sum(flows))


def measurement(
    r: Iperf3Result, artifacts: dict[str, bytes], window: tuple[float, float], *, processes: int, flows: int
) -> Measurement:
    """A bulk test's result as the trial's figures: throughput per direction, retransmits, the generator's own
    figures, the per-second series and streams, and what generated it."""
    m = Measurement(artifacts=artifacts, window=window)
    m.metrics.update(generator_metrics(r))
    m.metrics.update(
        {
            core.THROUGHPUT.name: r.throughput_bps,
            core.THROUGHPUT_DIR.key(direction="up"): r.up_bps,
            core.THROUGHPUT_DIR.key(direction="down"): r.down_bps,
            core.RETRANSMITS.name: r.retransmits,
            CWND_MAX.name: r.snd_cwnd_max_bytes,
            DURATION.name: r.duration_s,
        }
    )
    add_flows(m, r)
    m.params["generator"] = generator_params(r, processes=processes, flows=flows)
    return m


def generator_params(r: Iperf3Result, *, processes: int, flows: int) -> dict[str, Any]:
    """What generated a trial's traffic, for its params: the program, its version, processes and flows."""
    return {"program": "iperf3", "version": r.version, "processes": processes, "flows": flows}


def merge(results: list[Iperf3Result]) -> Iperf3Result:
    """Several iperf3 tests that ran at once, as one (pure): throughput, bytes and retransmits summed, the
    streams side by side, the per-interval throughput summed interval by interval, the busiest process's
    CPU (the generator is bound when any one of them is), the shortest duration and RTT."""
    if len(results) == 1:
        return results[0]

    def total(xs: list[float | None]) -> float | None:
        nums = [x for x in xs if x is not None]
        return sum(nums) if nums else None

    def most(xs: list[float | None]) -> float | None:
        nums = [x for x in xs if x is not None]
        return max(nums) if nums else None

    intervals: list[IntervalPoint] = []
    for d in ("up", "down"):
        per = [[pt for pt in r.intervals if pt.direction == d] for r in results]
        for pts in zip(*per, strict=False):
            intervals.append(IntervalPoint(pts[0].t_s, sum(pt.bps for pt in pts), d))
    retrans = [r.retransmits for r in results if r.retransmits is not None]
    cwnd = [r.snd_cwnd_max_bytes for r in results if r.snd_cwnd_max_bytes is not None]
    rtts = [r.min_rtt_s for r in results if r.min_rtt_s is not None]
    keys = {d for r in results for d in r.received_bytes} | {d for r in results for d in r.sent_bytes_total}
    return Iperf3Result(
        throughput_bps=sum(r.throughput_bps for r in results),
        up_bps=total([r.up_bps for r in results]),
        down_bps=total([r.down_bps for r in results]),
        retransmits=sum(retrans) if retrans else None,
        duration_s=min(r.duration_s for r in results),
        streams=[s for r in results for s in r.streams],
        intervals=intervals,
        snd_cwnd_max_bytes=max(cwnd) if cwnd else None,
        version=results[0].version,
        silent_streams=sum(r.silent_streams for r in results),
        received_bytes={d: sum(r.received_bytes.get(d, 0.0) for r in results) for d in keys},
        sent_bytes_total={d: sum(r.sent_bytes_total.get(d, 0.0) for r in results) for d in keys},
        cpu_client_pct=most([r.cpu_client_pct for r in results]),
        cpu_server_pct=most([r.cpu_server_pct for r in results]),
        min_rtt_s=min(rtts) if rtts else None,
    )


def add_flows(m: Measurement, r: Iperf3Result) -> None:
    """The throughput over time per direction and the per-stream results of an iperf3 test, into `m`."""
    for d in ("up", "down"):
        pts = [(pt.t_s, pt.bps) for pt in r.intervals if pt.direction == d]
        if pts:
            m.series[f"throughput_bps.{d}"] = pts
    m.streams = [(s.stream, s.direction, s.received_bps, s.retransmits) for s in r.streams]


def measured_window(r: Iperf3Result, launched: float, exited: float) -> tuple[float, float]:
    """The measured seconds of an iperf3 test on the monotonic clock. iperf3 -J prints only relative times,
    so the window is anchored at the client's exit: the test's timer ended about two round trips before it
    (TEST_END, then the result exchange), and the measured part is the `duration` before that. Shifting
    the window by a few ms moves CPU between warm-up and measurement at the same load, which is why this
    anchor is good enough for the CPU figures (see docs: CPU window)."""
    exchange_s = 2.0 * (r.min_rtt_s or 0.0)
    end = max(launched, exited - exchange_s)
    return max(launched, end - r.duration_s), end


def generator_metrics(r: Iperf3Result) -> dict[str, float | None]:
    """iperf3's own CPU figures, the bytes the cross-checks need, and whether the generator was the limit
    (stored under GENERATOR's names)."""
    client_cpu, server_cpu = GENERATOR.cpu
    m: dict[str, float | None] = {client_cpu: r.cpu_client_pct, server_cpu: r.cpu_server_pct}
    for d, b in r.received_bytes.items():
        m[GENERATOR.payload_bytes.format(direction=d)] = b
    for d, b in r.sent_bytes_total.items():
        m[GENERATOR.sent_bytes.format(direction=d)] = b
    busiest = max((v for v in (r.cpu_client_pct, r.cpu_server_pct) if v is not None), default=None)
    if busiest is not None:
        m[GENERATOR.bound] = 1.0 if busiest >= GENERATOR_BOUND_PCT else 0.0
    return m


def wait_listening(place: Place, port: int, server: Proc, timeout_s: float = 10.0, proto: str = "tcp") -> None:
    """Until `server` listens on `port` at its place (it is a trial error if it dies or never does)."""
    deadline = time.monotonic() + timeout_s
    while not place.port_open(port, proto):
        if not server.alive():
            raise TrialError(f"{server.what} exited: {server.log_tail(5)}")
        if time.monotonic() > deadline:
            raise TrialError(f"{server.what} not listening on {port} after {timeout_s:g} s")
        time.sleep(0.01)


class ServerProc(contextlib.AbstractContextManager["ServerProc"]):
    """A generator's server for one trial at the server's place: spawned, waited for until it listens on its
    port, and stopped (by process group) on exit, also when it never listened."""

    def __init__(self, ctx: Context, argv: list[str], *, port: int, what: str, log_name: str, proto: str = "tcp"):
        self.ctx, self.argv, self.port, self.proto = ctx, argv, port, proto
        self.what, self.log_name = what, log_name
        self.daemon: Proc | None = None

    def __enter__(self) -> ServerProc:
        self.daemon = self.ctx.server.spawn(self.argv, what=self.what, log_name=self.log_name)
        try:
            wait_listening(self.ctx.server, self.port, self.daemon, proto=self.proto)
        except BaseException:
            self.daemon.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.daemon is not None:
            self.daemon.stop()
