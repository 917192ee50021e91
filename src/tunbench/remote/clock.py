"""Clock offset between the controller and a host, NTP-style, over the agent's channel.

Each exchange notes the local time before sending (t0) and after the answer (t3); the host's reading r
was taken somewhere in between, so its offset is r - (t0 + t3) / 2 with an error of at most (t3 - t0) / 2
(half the round trip), whatever the asymmetry of the two directions. Of several exchanges the one with the
shortest round trip gives the tightest bound, and that bound is what is stored as the uncertainty. Both
clocks are measured: the monotonic one maps the host's sampler times onto the controller's, the wall one
corrects one-way delays.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

EXCHANGES = 8


@dataclass(frozen=True)
class ClockOffset:
    mono_s: float  # host monotonic - local monotonic
    wall_s: float  # host wall clock - local wall clock
    uncertainty_s: float  # |error| bound of each offset (half the best round trip)
    rtt_s: float  # the best round trip
    exchanges: int

    def to_local_mono(self, host_mono: float) -> float:
        return host_mono - self.mono_s

    def to_host_mono(self, local_mono: float) -> float:
        return local_mono + self.mono_s


@dataclass(frozen=True)
class Exchange:
    t0_mono: float
    t0_wall: float
    t3_mono: float
    t3_wall: float
    host_mono: float
    host_wall: float


def offset_from(exchanges: list[Exchange]) -> ClockOffset:
    """The offset estimate from the exchange with the shortest round trip."""
    if not exchanges:
        raise ValueError("no clock exchanges")
    best = min(exchanges, key=lambda e: e.t3_mono - e.t0_mono)
    rtt = best.t3_mono - best.t0_mono
    return ClockOffset(
        mono_s=best.host_mono - (best.t0_mono + best.t3_mono) / 2,
        wall_s=best.host_wall - (best.t0_wall + best.t3_wall) / 2,
        uncertainty_s=rtt / 2,
        rtt_s=rtt,
        exchanges=len(exchanges),
    )


def estimate_offset(ask: Callable[[], Mapping[str, float]], n: int = EXCHANGES) -> ClockOffset:
    """`ask()` returns the host's {"mono": ..., "wall": ...} readings; it is called n times."""
    out = []
    for _ in range(n):
        t0m, t0w = time.monotonic(), time.time()
        r = ask()
        t3m, t3w = time.monotonic(), time.time()
        out.append(Exchange(t0m, t0w, t3m, t3w, float(r["mono"]), float(r["wall"])))
    return offset_from(out)
