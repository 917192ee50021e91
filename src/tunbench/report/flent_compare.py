"""Flent's RRUL figures and tunbench's rrul side by side, by one reader (pure): every source, a Flent data
file (Flent's own or one tunbench wrote) or a tunbench run's rrul trials put in Flent's format in memory, is
summarised by report/exporters/flent.py with Flent's rules, in the windows asked for:

- ``tunbench``: the load's seconds only (a tunbench file's recorded load, Flent's DELAY cut off each end of
  its own), as rrul's loaded p50/p99 are computed;
- ``flent``: every second, the idle ones before and after the load included, as `flent -f summary` does
  without --data-cutoff (and rrul's ``summary = "flent"`` stores as latency.whole_p50_ms/p99).

Each source gives one row per file or trial; each side's median over its rows is set beside the other's
with their ratio (tunbench over Flent)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from tunbench.errors import ExportError
from tunbench.report.exporters import flent
from tunbench.results import RunRecord

Windows = Literal["tunbench", "flent"]
WINDOWS: tuple[Windows, ...] = ("tunbench", "flent")
# the probe both tools send: unmarked UDP (Flent: irtt, or netperf UDP_RR without irtt; tunbench: irtt)
DEFAULT_PING = flent.PING


@dataclass(frozen=True)
class Row:
    """One file's or trial's figures: the ping series' median, p99 and sample count, each direction's mean
    goodput (Mbit/s)."""

    source: str
    title: str
    ping_p50_ms: float | None
    ping_p99_ms: float | None
    n: int
    up_mbit: float | None
    down_mbit: float | None

    def values(self) -> tuple[float | None, float | None, float | None, float | None]:
        return self.ping_p50_ms, self.ping_p99_ms, self.up_mbit, self.down_mbit


def cutoff(f: flent.FlentFile, windows: Windows) -> flent.Cutoff | None:
    """The cut-off of `windows` for this file: the load only, or none (every second)."""
    return flent.load_cutoff(f) if windows == "tunbench" else None


def row(f: flent.FlentFile, source: str, windows: Windows | flent.Cutoff, ping: str = DEFAULT_PING) -> Row:
    """The figures of one file in `windows` (or Flent's own --data-cutoff START,END); ExportError naming the
    file when it has no such ping series."""
    fig = flent.figures(f, cutoff(f, windows) if isinstance(windows, str) else windows)
    if ping not in fig.ping:
        have = ", ".join(repr(p) for p in sorted(fig.ping)) or "none"
        raise ExportError(f"{source} has no series {ping!r} (its ping series: {have}); pick one with --ping")
    lat = fig.ping[ping]
    return Row(source, fig.title, lat.median_ms, lat.p99_ms, lat.n, fig.upload_mbit, fig.download_mbit)


def run_rows(run: RunRecord, windows: Windows, ping: str = DEFAULT_PING) -> list[Row]:
    """A run's rrul trials that measured, each written to Flent's format in memory and read back; ExportError
    when the run has none."""
    found = flent.rrul_trials([run])
    if not found:
        raise ExportError(f"run {run.uid} has no rrul trial that measured: nothing to compare with Flent's")
    return [
        replace(
            row(flent.read(flent.render_trial(r, t)), f"{r.name or r.uid} #{t.seq}", windows, ping),
            title=f"{t.label} {t.profile} {t.flows}f rep {t.repetition}",
        )
        for r, t in found
    ]


def _median(vals: Sequence[float | None]) -> float | None:
    known = [v for v in vals if v is not None]
    return statistics.median(known) if known else None


def median_row(rows: Sequence[Row], source: str) -> Row:
    """Each figure's median over the rows (those that have it); n is the rows'."""
    cols = list(zip(*(r.values() for r in rows), strict=True)) if rows else [(), (), (), ()]
    p50, p99, up, down = (_median(c) for c in cols)
    return Row(source, f"median of {len(rows)}", p50, p99, len(rows), up, down)


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, None when either is unknown or b is 0."""
    return a / b if a is not None and b else None


def ratios(tunbench: Row, flents: Row) -> tuple[float | None, ...]:
    """tunbench's figures over Flent's, figure by figure (p50, p99, up, down)."""
    return tuple(ratio(a, b) for a, b in zip(tunbench.values(), flents.values(), strict=True))
