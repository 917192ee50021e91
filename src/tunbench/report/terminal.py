"""The terminal table (rich)."""

from __future__ import annotations

import math

from rich import box
from rich.markup import escape
from rich.table import Table

from tunbench.report.summary import CaseSummary


def mbit(bps: float | None) -> str:
    if bps is None or math.isnan(bps):
        return "–"
    return f"{bps / 1e6:,.0f}" if bps >= 1e7 else f"{bps / 1e6:,.2f}"


def pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.0f}%"


def pair(a: str, b: str) -> str:
    return "–" if a == b == "–" else f"{a} / {b}"


def summary_table(summaries: list[CaseSummary], title: str = "") -> Table:
    """Per case: median throughput [min–max], n, ratio to direct, CPU (client / server, % of one core)
    and efficiency (Mbit per CPU-second, client / server)."""
    profiles = sorted({s.case.profile for s in summaries})
    show_profile = len(profiles) > 1
    if not show_profile and profiles:
        title = f"{title} · profile {profiles[0]}" if title else f"profile {profiles[0]}"
    table = Table(
        title=title or None,
        header_style="bold",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        caption_justify="left",
        caption="CPU: % of one core, client / server · Mbit/CPU-s: throughput per CPU-second used",
    )
    for col, justify in [
        ("tunnel", "left"),
        ("profile", "left"),
        ("dir", "left"),
        ("flows", "right"),
        ("Mbit/s", "right"),
        ("min–max", "right"),
        ("n", "right"),
        ("×direct", "right"),
        ("CPU %", "right"),
        ("Mbit/CPU-s", "right"),
    ]:
        if col == "profile" and not show_profile:
            continue
        table.add_column(
            col,
            justify=justify,  # type: ignore[arg-type]
            overflow="fold",
            min_width=14 if col == "tunnel" else None,
            no_wrap=col not in ("tunnel", "profile", "min–max"),
        )
    for s in summaries:
        t = s.throughput
        med = f"[bold]{mbit(t.median)}[/]" if s.n else "[red]failed[/]"
        rng = f"{mbit(t.min)}–{mbit(t.max)}" if s.n else ""
        n = f"{s.n}" + (f" [red]({s.n_failed}✗)[/]" if s.n_failed else "")
        ratio = "–"
        if s.ratio_to_direct is not None and not math.isnan(s.ratio_to_direct.value):
            ratio = f"{s.ratio_to_direct.value:.2f}"
        c, v = s.roles["client"], s.roles["server"]
        table.add_row(
            escape(s.case.label),
            *([escape(s.case.profile)] if show_profile else []),
            s.case.direction,
            str(s.case.flows),
            med,
            rng,
            n,
            ratio,
            pair(pct(c.cpu_pct).rstrip("%"), pct(v.cpu_pct).rstrip("%")),
            pair(mbit(c.bits_per_cpu_s), mbit(v.bits_per_cpu_s)),
        )
    return table


def warning_lines(summaries: list[CaseSummary]) -> list[str]:
    lines = []
    for s in summaries:
        for e in s.errors:
            where = f"{s.case.label} ({s.case.profile}, {s.case.direction}, {s.case.flows})"
            lines.append(f"[red]{escape(where)}: {escape(e)}[/]")
        for w in s.warnings:
            if w.code in ("high-cv", "outlier"):
                where = f"{s.case.label} ({s.case.direction}, {s.case.flows})"
                lines.append(f"[yellow]{escape(where)}: {escape(w.message)}[/] — {escape(w.fix)}")
    return lines
