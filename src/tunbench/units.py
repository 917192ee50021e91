"""How a metric's value is written for people, by its unit: one place for the table, the progress lines
and the HTML report, and for each workload's own headline."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator


def mbit(bps: float | None) -> str:
    """Bits per second as Mbit/s: no decimals from 10 Mbit/s up, two below."""
    if bps is None or math.isnan(bps):
        return "–"
    return f"{bps / 1e6:,.0f}" if bps >= 1e7 else f"{bps / 1e6:,.2f}"


_RATE_UNITS = ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s"))


def fmt_bps(bps: float | None) -> str:
    """A bit rate with three significant digits and an adaptive unit: 1.75 Mbit/s, 230 Mbit/s, 17.1 Gbit/s."""
    if bps is None or not math.isfinite(bps):
        return "–"
    for scale, unit in _RATE_UNITS:
        if abs(bps) >= scale:
            return f"{_sig3(bps / scale)} {unit}"
    return f"{_sig3(bps)} bit/s"


def _sig3(x: float) -> str:
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def minutes(seconds: float) -> str:
    """A duration as a person reads it: whole seconds below 90 s, else minutes to a tenth (an estimate, a
    budget's remainder)."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def fmt(value: float | None, unit: str) -> str:
    """`value` written in `unit`: mbit (bit/s as Mbit/s), frac (a fraction as %), pct (already %), s
    (seconds as ms), sec (seconds), ms, n (a count), ratio, kb (bytes as KiB), k (a count in thousands: 23.2k),
    us (microseconds: three significant digits, whole from 100); '–' when there is none."""
    if value is None or math.isnan(value):
        return "–"
    if unit == "mbit":
        return mbit(value)
    if unit == "frac":
        return f"{100 * value:.2f}%"
    if unit == "s":
        return f"{1000 * value:,.0f}" if value >= 1 else f"{1000 * value:.1f}"
    if unit == "n":
        return f"{value:.0f}"
    if unit == "sec":
        return f"{value:.2f}"
    if unit == "pct":
        return f"{value:.1f}%"
    if unit == "ratio":
        return f"{value:.2f}"
    if unit == "kb":
        return f"{value / 1024:,.0f} KiB"
    if unit == "k":
        return f"{value / 1e3:.1f}k"
    if unit == "us":
        return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
    return f"{value:.2f}" if value < 100 else f"{value:,.1f}"


_RATE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(bit|bps|b)?(?:/s)?\s*$", re.I)
_SCALE = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


def parse_rate(value: str | float) -> float:
    """`500mbit`, `1.5gbit`, `200M`, `1e6` or a number -> bits per second (> 0)."""
    if isinstance(value, int | float):
        bps = float(value)
    else:
        m = _RATE.match(value)
        if not m:
            raise ValueError(f"{value!r} is not a rate (e.g. 500mbit, 1gbit, 200M)")
        bps = float(m.group(1)) * _SCALE[m.group(2).lower()]
    if not bps > 0 or math.isinf(bps):
        raise ValueError(f"rate must be > 0 (got {value!r})")
    return bps


_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ns|us|ms|s)\s*$")
_DURATION_SCALE = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def parse_duration_s(value: str) -> float:
    """`4s`, `500ms`, `250us`, `10ns` (tunbench-link's duration units) -> seconds."""
    m = _DURATION.match(value)
    if not m:
        raise ValueError(f"{value!r} is not a duration (e.g. 4s, 500ms)")
    return float(m.group(1)) * _DURATION_SCALE[m.group(2)]


def parse_fraction(text: str, flag: str) -> float:
    """A share as people write it, for a flag (`compare --threshold`, `--target`, `run --redo-steal`, ...):
    '3%' or '0.03' -> 0.03, in [0, 1). A bare number >= 1 is refused (ambiguous: does 3 mean 300 %?). A bad
    value is a ValueError whose message starts with the flag and the text."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ValueError(f"{flag} {text!r}: expected a percentage like 3% or a fraction like 0.03") from None
    if not raw.endswith("%") and value >= 1.0:
        raise ValueError(f"{flag} {text!r}: write {raw}% for percent (a bare number is a fraction, 0.03 = 3%)")
    if not math.isfinite(value) or value < 0.0 or value >= 1.0:
        raise ValueError(f"{flag} {text!r}: must be between 0% and 100%")
    return value


def _valid_rate(value: str) -> str:
    parse_rate(value)  # raises ValueError with the reason
    return value


RateText = Annotated[str, AfterValidator(_valid_rate)]  # a rate as the user wrote it, e.g. "500mbit"


@dataclass(frozen=True)
class Window:
    """A trial's measured window, in whole seconds (iperf3 3.12 truncates fractional -t/-O, and -t 0 means
    "forever"): `duration_s` measured after `omit_s` of warm-up. Given once by the scenario
    ([workload] duration_s / omit_s, `--duration` / `--omit`) and carried whole to every workload."""

    duration_s: int
    omit_s: int = 0

    @property
    def total_s(self) -> int:
        """Warm-up and measured seconds together: the least a window can take."""
        return self.duration_s + self.omit_s
