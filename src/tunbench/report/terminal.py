"""The terminal table (rich)."""

from __future__ import annotations

import math

from rich.table import Table

from tunbench.report.summary import CaseSummary


def mbit(bps: float | None) -> str:
    if bps is None or math.isnan(bps):
        return "–"
    return f"{bps / 1e6:,.0f}" if bps >= 1e7 else f"{bps / 1e6:,.2f}"


def pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.0f}%"


def summary_table(summaries: list[CaseSummary], title: str = "") -> Table:
    table = Table(title=title or None, header_style="bold", show_lines=False)
    for col, justify in [
        ("tunnel", "left"),
        ("profile", "left"),
        ("dir", "left"),
        ("flows", "right"),
        ("Mbit/s median [min–max]", "right"),
        ("n", "right"),
        ("vs direct", "right"),
        ("CPU client", "right"),
        ("CPU server", "right"),
        ("Mbit/CPU-s client", "right"),
        ("Mbit/CPU-s server", "right"),
    ]:
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for s in summaries:
        t = s.throughput
        thr = f"[bold]{mbit(t.median)}[/] [{mbit(t.min)}–{mbit(t.max)}]" if s.n else "[red]failed[/]"
        n = f"{s.n}" + (f" [red]({s.n_failed} failed)[/]" if s.n_failed else "")
        ratio = "–"
        if s.ratio_to_direct is not None and not math.isnan(s.ratio_to_direct.value):
            ratio = f"{s.ratio_to_direct.value:.2f}×"
        c, v = s.roles["client"], s.roles["server"]
        table.add_row(
            s.case.label,
            s.case.profile,
            s.case.direction,
            str(s.case.flows),
            thr,
            n,
            ratio,
            pct(c.cpu_pct),
            pct(v.cpu_pct),
            mbit(c.bits_per_cpu_s),
            mbit(v.bits_per_cpu_s),
        )
    return table


def warning_lines(summaries: list[CaseSummary]) -> list[str]:
    lines = []
    for s in summaries:
        for e in s.errors:
            lines.append(f"[red]{s.case.label} ({s.case.profile}, {s.case.direction}, {s.case.flows}): {e}[/]")
        for w in s.warnings:
            if w.code in ("high-cv", "outlier"):
                lines.append(f"[yellow]{s.case.label} ({s.case.direction}, {s.case.flows}): {w.message}[/] — {w.fix}")
    return lines
