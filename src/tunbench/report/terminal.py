"""The terminal table (rich)."""

from __future__ import annotations

import math
import re
from collections import defaultdict

from rich import box
from rich.markup import escape
from rich.table import Table

from tunbench import workloads
from tunbench.report.headlines import AXES, headline_tables, own_table
from tunbench.report.summary import CaseSummary
from tunbench.results import TrialRecord
from tunbench.stats import StabilityWarning
from tunbench.stats.checks import STEAL_WARN_PCT
from tunbench.units import mbit


def pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.0f}%"


def pair(a: str, b: str) -> str:
    return "–" if a == b == "–" else f"{a} / {b}"


def summary_table(summaries: list[CaseSummary], title: str = "") -> Table:
    """Per case: median throughput [min–max], n, ratio to direct, CPU (client / server, % of one core)
    and efficiency (Mbit per CPU-second, client / server). Cases of workloads with a table of their own are
    left to workload_tables()."""
    summaries = [s for s in summaries if not own_table(s.case.workload)]
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
        caption="CPU: % of one core, client / server · Mbit/CPU-s: throughput per CPU-second used"
        + (" · link CPU: the WAN emulator's own" if any("link" in s.roles for s in summaries) else ""),
    )
    per_flow = any(s.case.flows > 1 for s in summaries)
    link_cpu = any("link" in s.roles for s in summaries)
    for col, justify in [
        ("tunnel", "left"),
        ("profile", "left"),
        ("dir", "left"),
        ("flows", "right"),
        ("Mbit/s", "right"),
        ("min–max", "right"),
        ("per flow", "right"),
        ("n", "right"),
        ("×direct", "right"),
        ("CPU %", "right"),
        ("Mbit/CPU-s", "right"),
        ("link CPU %", "right"),
    ]:
        if (
            (col == "profile" and not show_profile)
            or (col == "per flow" and not per_flow)
            or (col == "link CPU %" and not link_cpu)
        ):
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
            *([mbit(t.median / s.case.flows) if s.n else "–"] if per_flow else []),
            n,
            ratio,
            pair(pct(c.cpu_pct).rstrip("%"), pct(v.cpu_pct).rstrip("%")),
            pair(mbit(c.bits_per_cpu_s), mbit(v.bits_per_cpu_s)),
            *([pct(s.roles["link"].cpu_pct) if "link" in s.roles else "–"] if link_cpu else []),
        )
    return table


def _case_name(s: CaseSummary, show_profile: bool) -> str:
    c = s.case
    count = f" ×{c.flows}" if c.flows > 1 else f" ×{c.clients}" if c.clients > 1 else ""
    prof = f" @{c.profile}" if show_profile else ""
    return f"{c.label} {c.variant or c.direction}{count}{prof}"


def _late_ms(w: StabilityWarning) -> str:
    m = re.search(r"up to ([0-9.]+ ms)", w.message)
    return m.group(1) if m else "late"


def _steal(w: StabilityWarning) -> tuple[str, int]:
    """(the highest steal, how many trials) from a `steal` warning's message."""
    m = re.search(r"up to ([0-9.]+%) of the CPU time in (\d+) of", w.message)
    return (m.group(1), int(m.group(2))) if m else ("steal", 1)


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
    if late := grouped.get("link-late"):
        cases = ", ".join(f"{_case_name(s, show_profile)} ({_late_ms(w)})" for s, w in late)
        lines.append(
            f"[yellow]the WAN emulator fell behind its schedule (p99 lateness) in {escape(cases)}[/], so the link "
            f"was slower than the profile says — {escape(late[0][1].fix)}"
        )
    if stolen := grouped.get("steal"):
        cases = ", ".join(f"{_case_name(s, show_profile)} (up to {_steal(w)[0]})" for s, w in stolen)
        n = sum(_steal(w)[1] for _, w in stolen)
        lines.append(
            f"[yellow]steal time >= {STEAL_WARN_PCT:.0f}% of the CPU in {n} trial(s): {escape(cases)}[/] — "
            f"{escape(stolen[0][1].fix)}"
        )
    for code in ("generator-bound", "cross-check"):
        for _, w in grouped.get(code, []):
            lines.append(f"[yellow]{escape(w.message)}[/] — {escape(w.fix)}")
    if few := grouped.get("too-few-repetitions"):
        lines.append(f"[yellow]{len(few)} case(s) with fewer than 3 good repetitions[/] — {escape(few[0][1].fix)}")
    return lines


# ---- non-throughput workloads ------------------------------------------------------------------------


def has_throughput_cases(summaries: list[CaseSummary]) -> bool:
    return any(not own_table(s.case.workload) for s in summaries)


def workload_tables(trials: list[TrialRecord]) -> list[Table]:
    """One table per workload in `trials` that has a table of its own (Workload.columns): each case's
    headline metrics, the median over its good repetitions, and n."""
    tables = headline_tables(trials)
    show_profile = len({r.case.profile for t in tables for r in t.rows}) > 1
    out = []
    for ht in tables:
        table = Table(
            title=f"{ht.kind} (median of repetitions)",
            header_style="bold",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
            caption=ht.caption or None,
            caption_justify="left",
        )
        table.add_column("tunnel", min_width=14, overflow="fold")
        if show_profile:
            table.add_column("profile")
        for a in ht.axes:
            table.add_column(AXES[a][1], justify="right" if a in ("flows", "clients") else "left")
        for col in ht.columns:
            table.add_column(col.header, justify="right", no_wrap=True)
        table.add_column("n", justify="right")
        for r in ht.rows:
            n = f"{r.ok}" + (f" [red]({r.failed}✗)[/]" if r.failed else "")
            cells = r.cells if r.ok else ["[red]failed[/]"] + ["" for _ in ht.columns[1:]]
            table.add_row(
                escape(r.case.label),
                *([escape(r.case.profile)] if show_profile else []),
                *[str(getattr(r.case, a)) for a in ht.axes],
                *cells,
                n,
            )
        out.append(table)
    return out


def trial_headline(rec: TrialRecord) -> str:
    """One trial's result in a few words, for the progress lines (its workload's own headline)."""
    w = workloads.REGISTRY.get(rec.workload)
    return w.headline(rec) if w is not None else f"{mbit(rec.metrics.get('throughput_bps') or 0.0)} Mbit/s"
