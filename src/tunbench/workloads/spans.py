"""Pure helpers of the multi-client workloads, over spans of time: the common measured window (head and tail
trimmed), per-client throughput inside it, percentiles, time-to-ready summaries, growth ratios. No I/O."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tunbench.errors import TrialError
from tunbench.stats import percentile
from tunbench.workloads import iperf3
from tunbench.workloads.base import Scaling
from tunbench.workloads.fleet_metrics import SERVER_RSS_PER_CLIENT

# the tunnel server's memory per connected client, which both multi-client workloads record: one chart
RSS_PER_CLIENT = Scaling(
    SERVER_RSS_PER_CLIENT.name,
    1024.0,
    "rss",
    "Tunnel server memory per connected client (RSS growth / N)",
    "server RSS per client (KiB)",
    ",.0f",
)


@dataclass(frozen=True)
class Interval:
    """One iperf3 interval of one client, on the trial's clock (seconds)."""

    start_s: float
    end_s: float
    bytes: float
    packets: int | None = None
    lost: int | None = None


@dataclass(frozen=True)
class Span:
    """A stretch of time on one clock, in seconds: a many-client trial's measured window is the span in which
    every client ran (common_window)."""

    start_s: float
    end_s: float

    @property
    def length_s(self) -> float:
        return max(0.0, self.end_s - self.start_s)


def common_window(
    spans: Mapping[int, tuple[float, float]], warmup_s: float, tail_s: float = 0.0, max_s: float | None = None
) -> Span:
    """The interval where every client is active: from the last client's start (+ warm-up) to the first
    client's end (- tail), at most `max_s` long. `spans` maps client -> (first interval start, last end)."""
    if not spans:
        raise TrialError("no client produced any interval")
    start = max(s for s, _ in spans.values()) + warmup_s
    end = min(e for _, e in spans.values()) - tail_s
    if end <= start:
        raise TrialError(
            f"no common window: all clients were active together for {max(0.0, end - start + warmup_s):.2f} s "
            f"(warm-up {warmup_s:g} s); raise duration_s or lower the client count"
        )
    if max_s is not None:
        end = min(end, start + max_s)
    return Span(start, end)


def shift(intervals: Sequence[Interval], dt: float) -> list[Interval]:
    return [Interval(iv.start_s + dt, iv.end_s + dt, iv.bytes, iv.packets, iv.lost) for iv in intervals]


def anchor(launched_s: float, ended_s: float | None, rel_end_s: float) -> float:
    """Where a client's test began on the trial's clock. Its intervals count from the test's own start,
    which comes after the launch by however long connecting took (seconds, through an overloaded tunnel).
    The process's exit, seen within a few tens of ms, minus the test's length is closer; it can never be
    before the launch."""
    if ended_s is None:
        return launched_s
    return max(launched_s, ended_s - rel_end_s)


def split_late(starts: Mapping[int, float], tolerance_s: float) -> tuple[list[int], list[int]]:
    """Clients whose test began more than `tolerance_s` after the median start cannot cover the common
    window (they were kept from starting, e.g. by lost set-up packets): (kept, late)."""
    if not starts:
        return [], []
    med = percentile(list(starts.values()), 50)
    assert med is not None
    kept = sorted(i for i, t in starts.items() if t <= med + tolerance_s)
    late = sorted(i for i, t in starts.items() if t > med + tolerance_s)
    return kept, late


def bytes_in(intervals: Sequence[Interval], w: Span) -> float:
    """Bytes of the intervals inside the window (an interval cut by an edge counts pro rata)."""
    total = 0.0
    for iv in intervals:
        span = iv.end_s - iv.start_s
        if span <= 0:
            continue
        overlap = min(iv.end_s, w.end_s) - max(iv.start_s, w.start_s)
        if overlap > 0:
            total += iv.bytes * overlap / span
    return total


def loss_in(intervals: Sequence[Interval], w: Span) -> tuple[int, int]:
    """(lost, packets) over the intervals that lie mostly inside the window (UDP)."""
    lost = packets = 0
    for iv in intervals:
        mid = (iv.start_s + iv.end_s) / 2
        if w.start_s <= mid <= w.end_s and iv.packets is not None:
            packets += iv.packets
            lost += iv.lost or 0
    return lost, packets


def per_second(intervals: Mapping[int, Sequence[Interval]], w: Span) -> list[tuple[float, float]]:
    """Aggregate bits per second over all clients, in 1 s steps across the window (t from window start)."""
    out = []
    t = w.start_s
    while t + 1.0 <= w.end_s + 1e-9:
        step = Span(t, t + 1.0)
        out.append((t + 1.0 - w.start_s, sum(8 * bytes_in(ivs, step) for ivs in intervals.values())))
        t += 1.0
    return out


def distribution(xs: Sequence[float]) -> dict[str, float | None]:
    """The spread of `xs` by statistic (min, p10, p50, p90, max, mean; None each when empty): the caller
    names each in its metric (workloads/fleet_metrics.py's PER_CLIENT)."""
    if not xs:
        return dict.fromkeys(("min", "p10", "p50", "p90", "max", "mean"))
    return {
        "min": min(xs),
        "p10": percentile(xs, 10),
        "p50": percentile(xs, 50),
        "p90": percentile(xs, 90),
        "max": max(xs),
        "mean": sum(xs) / len(xs),
    }


def ready_cdf(ready_s: Sequence[float], total: int) -> list[tuple[float, float]]:
    """(seconds since the storm began, fraction of all clients ready) at each client's ready time."""
    return [(t, (n + 1) / total) for n, t in enumerate(sorted(ready_s))] if total else []


def per_second_counts(times_s: Sequence[float]) -> list[tuple[float, float]]:
    """Events per 1 s bucket: [(bucket end, count)], contiguous from the first bucket to the last."""
    if not times_s:
        return []
    buckets: dict[int, int] = {}
    for t in times_s:
        b = math.floor(t)
        buckets[b] = buckets.get(b, 0) + 1
    lo, hi = min(buckets), max(buckets)
    return [(float(b + 1), float(buckets.get(b, 0))) for b in range(lo, hi + 1)]


def cpu_between(series: Sequence[tuple[float, float]], t0: float, t1: float) -> float:
    """CPU seconds used between t0 and t1, from a cumulative (t, cpu_s) series (linear interpolation)."""

    def at(t: float) -> float:
        if not series:
            return 0.0
        if t <= series[0][0]:
            return series[0][1]
        for (ta, ca), (tb, cb) in itertools.pairwise(series):
            if ta <= t <= tb:
                return ca if tb == ta else ca + (cb - ca) * (t - ta) / (tb - ta)
        return series[-1][1]

    return max(0.0, at(t1) - at(t0))


def growth_ratio(cost_by_n: Mapping[int, float]) -> float | None:
    """Cost per client at the largest N over cost per client at the smallest N (1.0 = linear growth of the
    total); None with fewer than two N or a zero baseline."""
    if len(cost_by_n) < 2:
        return None
    lo, hi = min(cost_by_n), max(cost_by_n)
    base = cost_by_n[lo]
    if not base or base <= 0:
        return None
    return cost_by_n[hi] / base


# ---- iperf3 JSON (receiver-side intervals) -----------------------------------------------------------
def iperf3_intervals(text: str, *, receiver: str, offset_s: float) -> tuple[list[Interval], dict[str, Any]]:
    """Per-second intervals of the receiving side of one iperf3 client's JSON (`--get-server-output`):
    receiver="server" reads server_output_json (upload), "client" the client's own (download). Times are
    shifted by `offset_s` (when that client was launched, on the trial's clock). Returns (intervals, end)."""
    doc = iperf3.load_json(text)
    src = doc if receiver == "client" else doc.get("server_output_json")
    if not isinstance(src, dict):
        raise TrialError("iperf3 JSON has no server_output_json (was --get-server-output given?)")
    out = []
    for iv in src.get("intervals", []):
        s = iv.get("sum") or {}
        if "start" not in s:
            continue
        pk = s.get("packets")
        out.append(
            Interval(
                start_s=offset_s + float(s["start"]),
                end_s=offset_s + float(s["end"]),
                bytes=float(s.get("bytes", 0.0)),
                packets=int(pk) if pk is not None else None,
                lost=int(s["lost_packets"]) if "lost_packets" in s else None,
            )
        )
    return out, dict(doc.get("end") or {})
