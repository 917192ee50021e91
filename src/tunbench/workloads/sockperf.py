"""sockperf's ping-pong (rr and udp-rr with `generator = "sockperf"`): argv builders, a server owned by a
context manager, one client run, and a pure parser of its summary (tested on a committed output,
tests/data/sockperf-*.txt).

sockperf keeps every round trip of its measured seconds and prints percentiles of them up to 99.999 (the
sample at rank round(p·N) in the sorted times, src/client.cpp's printPercentiles), so it gives the p99.9
netperf cannot. Its ping-pong keeps one message in flight: it sends one, waits for its echo, and sends the
next. `--full-rtt` makes it print round-trip times; without it every figure is half the round trip (its
"latency"), and the parser refuses such output rather than store half of a transaction time. Its `-t` seconds
include a warm-up (the first 400 ms) and a cool-down (the last 50 ms) it leaves out of its figures: the rest is
its "valid duration", which the figures and the rate cover. Before `-t` starts it waits 2 s after its warm-up
messages (`START_S`), so the valid duration is placed back from its exit (`END_S`). Debian's sockperf 3.7
reads IPv4 addresses only (IPv6 came later, sockperf's pull request 161) and its messages carry a 14-byte
header, its smallest message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from tunbench.errors import TrialError
from tunbench.workloads.base import Context
from tunbench.workloads.iperf3 import ServerProc

Proto = Literal["tcp", "udp"]

MIN_MESSAGE_BYTES = 14
"""sockperf's smallest message: its header (a sequence number and flags) is 14 bytes (`-m` below it is refused:
"Invalid message size: 1 (min: 14)")."""

EXTRA_S = 1
"""Seconds added to the measured seconds in sockperf's `-t`: it leaves its first 400 ms and last 50 ms out of
its figures, so `-t duration + 1` measures at least `duration` seconds."""

START_S = 2.1
"""From sockperf's launch to its test's start: it sends its warm-up messages and then waits 2 s before
"Starting test..." (timed here: the line came 2.00 s after "Warmup stage", 2.12 s after the launch)."""

END_S = 0.15
"""From the end of its valid duration to its exit: its 50 ms cool-down, then about 100 ms from its timer to
its exit with the figures printed (timed here: 0.10 s with 29,000 round trips to sort)."""

PERCENTILES = {"25.000": "p25", "50.000": "p50", "75.000": "p75", "90.000": "p90", "99.000": "p99"}
PERCENTILES |= {"99.900": "p999", "99.990": "p9999", "99.999": "p99999"}
"""sockperf's printed percentile -> the name its figure is kept under (µs)."""


@dataclass(frozen=True)
class SockperfParams:
    """One ping-pong test: protocol, seconds and message size (request and echo are the same size)."""

    proto: Proto
    duration_s: int
    message_bytes: int = MIN_MESSAGE_BYTES

    @property
    def timeout_s(self) -> float:
        """How long before a silent sockperf is declared hung: its test, its summary and slack."""
        return self.duration_s + EXTRA_S + START_S + 20.0


def server_argv(proto: Proto, port: int) -> list[str]:
    # on every address of the server's place; one protocol per server
    return ["sockperf", "server", "-i", "0.0.0.0", "-p", str(port), *(["--tcp"] if proto == "tcp" else [])]


def client_argv(address: str, port: int, p: SockperfParams) -> list[str]:
    """sockperf ping-pong's argv: round-trip times (--full-rtt), as fast as the echoes come (--mps=max, its
    ping-pong default said out loud), `-t` the measured seconds plus its own warm-up and cool-down."""
    argv = ["sockperf", "ping-pong", "-i", address, "-p", str(port), "-t", str(p.duration_s + EXTRA_S)]
    argv += ["-m", str(p.message_bytes), "--mps=max", "--full-rtt"]
    return argv + (["--tcp"] if p.proto == "tcp" else [])


@dataclass(frozen=True)
class SockperfResult:
    """A ping-pong test's figures over its valid duration, as sockperf printed them (times in µs)."""

    elapsed_s: float  # the valid duration: -t less its warm-up and cool-down
    warmup_s: float  # the warm-up before it
    sent: int
    received: int  # round trips completed in the valid duration (its observations)
    dropped: int
    latency_us: dict[str, float]  # min, mean, stddev, max and PERCENTILES' names

    @property
    def transactions(self) -> float:
        return float(self.received)

    @property
    def transactions_per_s(self) -> float:
        return self.received / self.elapsed_s if self.elapsed_s > 0 else 0.0


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NUM = r"(\d+(?:\.\d+)?)"  # a figure as sockperf prints it (%.3lf): never a second dot, a sign or an exponent
_VALID = re.compile(rf"\[Valid Duration\] RunTime={_NUM} sec; SentMessages=(\d+); ReceivedMessages=(\d+)")
_WARMUP = re.compile(r"Warm up time=(\d+) msec")
_AVG = re.compile(rf"avg-(rtt|latency)={_NUM} \(std-dev={_NUM}")
_DROPPED = re.compile(r"# dropped messages = (\d+)")
_EDGE = re.compile(rf"<(MAX|MIN)> observation = +{_NUM}(?=\s|$)")
_PERCENTILE = re.compile(rf"percentile +{_NUM} = +{_NUM}(?=\s|$)")


def parse(text: str) -> SockperfResult:
    """sockperf ping-pong's output (colour codes and all). Output without a valid duration, a round-trip
    average or its percentiles is a TrialError naming what is missing; so is output in one-way "latency"
    (half the round trip: run without --full-rtt) and a test that received no echo."""
    clean = _ANSI.sub("", text)
    tail = clean.strip()[-300:]
    if "No messages were received" in clean:
        raise TrialError(f"sockperf received no echo from its server: {tail!r}")
    if "Printing statistics for Server No: 1" in clean:
        raise TrialError("sockperf printed figures for more than one server: one was expected")
    valid, avg = _VALID.search(clean), _AVG.search(clean)
    if valid is None or avg is None:
        what = "its valid duration" if valid is None else "a round-trip average"
        raise TrialError(f"sockperf printed no {what}: {tail!r}")
    if avg.group(1) != "rtt":
        raise TrialError("sockperf printed one-way latency (half the round trip), not round-trip times (--full-rtt)")
    latency = {"mean": float(avg.group(2)), "stddev": float(avg.group(3))}
    latency |= {m.group(1).lower(): float(m.group(2)) for m in _EDGE.finditer(clean)}
    latency |= {
        PERCENTILES[m.group(1)]: float(m.group(2)) for m in _PERCENTILE.finditer(clean) if m.group(1) in PERCENTILES
    }
    missing = [q for q in ("min", "p50", "p90", "p99", "max") if q not in latency]
    if missing:
        raise TrialError(f"sockperf's output lacks {', '.join(missing)}: {tail!r}")
    warmup, dropped = _WARMUP.search(clean), _DROPPED.search(clean)
    return SockperfResult(
        elapsed_s=float(valid.group(1)),
        warmup_s=int(warmup.group(1)) / 1000 if warmup else 0.4,
        sent=int(valid.group(2)),
        received=int(valid.group(3)),
        dropped=int(dropped.group(1)) if dropped else 0,
        latency_us=latency,
    )


class SockperfServer(ServerProc):
    """A fresh `sockperf server` at the server's place for one trial, on the workload's port."""

    def __init__(self, ctx: Context, proto: Proto) -> None:
        port = ctx.server_port
        super().__init__(
            ctx,
            server_argv(proto, port),
            port=port,
            what="sockperf server",
            log_name="sockperf-server.log",
            proto=proto,
        )


def run_client(ctx: Context, p: SockperfParams, name: str) -> tuple[SockperfResult, str]:
    """One ping-pong test from the client's place to the target (the tunnel's inner address, or an L4 proxy's
    local port for TCP): its result and its output."""
    t = ctx.target
    if ":" in t.address:
        raise TrialError(
            f"sockperf 3.7 (Debian's) reads IPv4 addresses only, and the target is {t.address}: use "
            'generator = "netperf" over IPv6'
        )
    res = ctx.client.run(
        client_argv(t.address, t.port, p), timeout_s=p.timeout_s, check=False, what=f"sockperf {name} ({ctx.title})"
    )
    if res.returncode != 0:
        raise TrialError(f"sockperf ping-pong exit {res.returncode}: {(res.stderr or res.stdout).strip()[-400:]}")
    out = res.stdout + (res.stderr or "")
    r = parse(out)
    if r.received <= 0 or r.elapsed_s <= 0:
        raise TrialError(f"sockperf completed no round trip in {r.elapsed_s:g} s")
    return r, out
