"""The terminal table (rich)."""

from __future__ import annotations

import math
from collections import defaultdict

from rich import box
from rich.markup import escape
from rich.table import Table

from tunbench.report.summary import CaseSummary
from tunbench.stats import StabilityWarning


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


def _case_name(s: CaseSummary, show_profile: bool) -> str:
    flows = f" ×{s.case.flows}" if s.case.flows > 1 else ""
    prof = f" @{s.case.profile}" if show_profile else ""
    return f"{s.case.label} {s.case.direction}{flows}{prof}"


def warning_lines(summaries: list[CaseSummary]) -> list[str]:
    """Failed trials (one line per distinct error), then the stability warnings grouped by kind, so a
    noisy run gives two lines, not two per case."""
    show_profile = len({s.case.profile for s in summaries}) > 1
    lines = []
    for s in summaries:
        for e in s.errors:
            lines.append(f"[red]✗ {escape(_case_name(s, show_profile))}: {escape(e)}[/]")
    grouped: dict[str, list[tuple[CaseSummary, StabilityWarning]]] = defaultdict(list)
    for s in summaries:
        for w in s.warnings:
            grouped[w.code].append((s, w))
    if noisy := grouped.get("high-cv"):
        cases = ", ".join(f"{_case_name(s, show_profile)} {s.throughput.cv:.0%}" for s, _ in noisy)
        lines.append(f"[yellow]noisy (CV >= 5%): {escape(cases)}[/] — {escape(noisy[0][1].fix)}")
    if odd := grouped.get("outlier"):
        cases = ", ".join(_case_name(s, show_profile) for s, _ in odd)
        lines.append(
            f"[yellow]min or max > 30% from the median: {escape(cases)}[/] — re-run, or look for "
            "interference (other load, CPU frequency)"
        )
    if few := grouped.get("too-few-repetitions"):
        lines.append(f"[yellow]{len(few)} case(s) with fewer than 3 good repetitions[/] — {escape(few[0][1].fix)}")
    return lines
