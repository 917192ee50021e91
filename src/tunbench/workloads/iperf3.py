"""iperf3 bulk TCP: argv builders and a pure parser of its JSON output.

The headline is the receiver's byte count (what actually arrived), excluding the --omit warm-up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from tunbench.errors import TrialError

Direction = Literal["up", "down", "bidir"]
DIRECTIONS: tuple[Direction, ...] = ("up", "down", "bidir")


@dataclass(frozen=True)
class Iperf3Params:
    flows: int = 1
    direction: Direction = "up"
    duration_s: float = 10.0
    omit_s: float = 1.0
    connect_timeout_ms: int = 3000

    @property
    def timeout_s(self) -> float:
        """How long before a silent iperf3 is declared hung: the test plus generous set-up slack."""
        return self.duration_s + self.omit_s + 10.0


def server_argv(port: int) -> list[str]:
    # -1: serve exactly one test, then exit; --rcv-timeout bounds a client that disappears mid-test
    return ["iperf3", "-s", "-1", "-p", str(port), "--rcv-timeout", "15000"]


def client_argv(address: str, port: int, p: Iperf3Params) -> list[str]:
    argv = [
        "iperf3",
        "-c",
        address,
        "-p",
        str(port),
        "-J",
        "-t",
        f"{p.duration_s:g}",
        "-O",
        f"{p.omit_s:g}",
        "-P",
        str(p.flows),
        "--connect-timeout",
        str(p.connect_timeout_ms),
    ]
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


def _stream_dir(stream: dict[str, Any], default: str) -> str:
    sender = stream.get("sender", {}) or {}
    # in bidir tests iperf3 marks each stream with `sender: true/false` from the client's view
    flag = sender.get("sender")
    if flag is None:
        return default
    return "up" if flag else "down"


def parse(text: str, direction: Direction) -> Iperf3Result:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise TrialError(f"iperf3 printed no valid JSON ({e}): {text[:200]!r}") from e
    if doc.get("error"):
        raise TrialError(f"iperf3: {doc['error']}")
    end = doc.get("end") or {}
    if "sum_received" not in end:
        raise TrialError("iperf3 JSON has no end.sum_received (test did not complete)")
    default_dir = "down" if direction == "down" else "up"
    first = end["sum_received"]
    up_bps: float | None
    down_bps: float | None
    if direction == "bidir":
        up_bps = float(first["bits_per_second"])
        down_bps = float(end.get("sum_received_bidir_reverse", {}).get("bits_per_second", 0.0))
        total = up_bps + down_bps
    else:
        total = float(first["bits_per_second"])
        up_bps, down_bps = (total, None) if direction == "up" else (None, total)
    retrans = _retransmits(end, direction)
    streams = []
    for i, s in enumerate(end.get("streams", [])):
        recv = s.get("receiver") or {}
        snd = s.get("sender") or {}
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
    for iv in doc.get("intervals", []):
        for key, d in (("sum", default_dir), ("sum_bidir_reverse", "down")):
            s = iv.get(key)
            if not s or s.get("omitted"):
                continue
            if t_base is None:
                t_base = float(s["start"])
            intervals.append(IntervalPoint(float(s["end"]) - t_base, float(s["bits_per_second"]), d))
    cwnd = [int(st["snd_cwnd"]) for iv in doc.get("intervals", []) for st in iv.get("streams", []) if "snd_cwnd" in st]
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
    )


def _retransmits(end: dict[str, Any], direction: Direction) -> int | None:
    vals = [end.get(k, {}).get("retransmits") for k in ("sum_sent", "sum_sent_bidir_reverse")]
    nums = [int(v) for v in vals if v is not None]
    if direction == "down":
        # with -R the client is the receiver; the server's retransmits arrive in sum_sent too (3.7+)
        pass
    return sum(nums) if nums else None
