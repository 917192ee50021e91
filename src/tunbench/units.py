"""How a metric's value is written for people, by its unit: one place for the table, the progress lines
and the HTML report, and for each workload's own headline."""

from __future__ import annotations

import math


def mbit(bps: float | None) -> str:
    """Bits per second as Mbit/s: no decimals from 10 Mbit/s up, two below."""
    if bps is None or math.isnan(bps):
        return "–"
    return f"{bps / 1e6:,.0f}" if bps >= 1e7 else f"{bps / 1e6:,.2f}"


def fmt(value: float | None, unit: str) -> str:
    """`value` written in `unit`: mbit (bit/s as Mbit/s), frac (a fraction as %), pct (already %), s
    (seconds as ms), sec (seconds), ms, n (a count), ratio, kb (bytes as KiB); '–' when there is none."""
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
    return f"{value:.2f}" if value < 100 else f"{value:,.1f}"
