"""mahimahi's packet-delivery trace format (mm-link(1)): one integer per line, a time in milliseconds at
which the link may deliver one 1500-byte packet. The pure pieces tunbench's Python side needs: making a
trace from a rate over time, and finding its silences. (tunbench-link reads traces itself.)"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable
from pathlib import Path

OPPORTUNITY_BITS = 1500 * 8


def opportunities(bps_per_ms: Iterable[float]) -> list[int]:
    """Rates, one per millisecond (bit/s) -> the ms of each 1500-byte delivery opportunity (the first
    millisecond is 1)."""
    out: list[int] = []
    credit = 0.0
    for ms, bps in enumerate(bps_per_ms, start=1):
        credit += bps / 1000.0
        while credit >= OPPORTUNITY_BITS:
            credit -= OPPORTUNITY_BITS
            out.append(ms)
    return out


def text(times: Iterable[int]) -> str:
    """A trace's file content."""
    return "".join(f"{ms}\n" for ms in times)


def gaps(times: list[int], min_gap_ms: int) -> list[tuple[int, int]]:
    """The silences of at least `min_gap_ms` between consecutive opportunities (ms: the one before, the one
    after), in order; the trace's first round only."""
    return [(a, b) for a, b in itertools.pairwise(times) if b - a >= min_gap_ms]


@functools.lru_cache(maxsize=16)
def file_gaps(path: str, min_gap_ms: int) -> tuple[tuple[int, int], ...]:
    """[`gaps`] of a trace file, read once per run ((): unreadable or not a trace)."""
    try:
        times = [int(line) for line in Path(path).read_text().split()]
    except (OSError, ValueError):
        return ()
    return tuple(gaps(times, min_gap_ms))
