"""The terminal table (rich)."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.markup import escape
from rich.table import Table

from tunbench import workloads
from tunbench.metrics.core import THROUGHPUT
from tunbench.report.common import fmt_ratio
from tunbench.report.headlines import AXES, headline_tables, own_table
from tunbench.report.summary import CaseSummary
from tunbench.results import TrialRecord
from tunbench.stats import StabilityWarning
from tunbench.stats.checks import (
    CV_WARN,
    MIN_REPETITIONS,
    MIN_REPETITIONS_SIGNIFICANCE,
    OUTLIER_REL,
    STEAL_WARN_PCT,
)
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
    on_cores = any(s.case.cores for s in summaries)
    link_cpu = any("link" in s.roles for s in summaries)
    for col, justify in [
        ("tunnel", "left"),
        ("profile", "left"),
        ("dir", "left"),
        ("flows", "right"),
        ("cores", "right"),
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
            or (col == "cores" and not on_cores)
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
        n = s.n_text + (f" [red]({s.n_failed}✗)[/]" if s.n_failed else "")
        ratio = "–"
        if s.ratio_to_direct is not None and not math.isnan(s.ratio_to_direct.value):
            ratio = fmt_ratio(s.ratio_to_direct.value)
        c, v = s.roles["client"], s.roles["server"]
        table.add_row(
            escape(s.case.label),
            *([escape(s.case.profile)] if show_profile else []),
            s.case.direction,
            str(s.case.flows),
            *([str(s.case.cores or "–")] if on_cores else []),
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
    cores = f" {c.cores}c" if c.cores else ""
    return f"{c.label} {c.variant or c.direction}{count}{cores}{prof}"


def _late_ms(w: StabilityWarning) -> str:
    m = re.search(r"up to ([0-9.]+ ms)", w.message)
    return m.group(1) if m else "late"


def _steal(w: StabilityWarning) -> tuple[str, int]:
    """(the highest steal, how many trials) from a `steal` warning's message."""
    m = re.search(r"up to ([0-9.]+%) of the CPU time in (\d+) of", w.message)
    return (m.group(1), int(m.group(2))) if m else ("steal", 1)


@dataclass(frozen=True)
class Flagged:
    """One warning about one subject (a case; for `compare`, a case's metric), with the short detail listed
    beside the subject in its group's line (a CV, a lateness) and how many `unit`s it stands for (trials
    with steal; else 1)."""

    subject: str
    warning: StabilityWarning
    detail: str = ""
    count: int = 1


CAUSES: dict[str, str] = {
    "no-data": "no measurements",
    "non-finite": "failed repetitions (NaN or inf)",
    "mostly-zero": "more than half of the repetitions measured 0",
    "high-cv": f"noisy (CV >= {CV_WARN:.0%})",
    "outlier": f"min or max > {OUTLIER_REL:.0%} from the median",
    "link-late": "the WAN emulator fell behind its schedule (p99 lateness), so the link was slower than the "
    "profile says,",
    "steal": f"steal time >= {STEAL_WARN_PCT:.0f}% of the CPU",
    "interfered": "interfered with (another tunbench run, foreign CPU or steal; docs/cross-checks.md)",
    "generator-bound": "",
    "cross-check": "",
    "not-cross-checked": "",
    "common-limit": "",
    "start-skew": "",
    "clients-lost": "",
    "host-saturated": "",
    "too-few-repetitions": f"fewer than {MIN_REPETITIONS} good repetitions",
    "few-for-significance": f"{MIN_REPETITIONS}-{MIN_REPETITIONS_SIGNIFICANCE - 1} repetitions, too few for a "
    "reliable significance test,",
    "cannot-reach-significance": "too few repetitions for any change to be called significant",
    "underpowered": "a change of the threshold's size can go undetected (MDE above the threshold)",
}
"""The cause each warning code stands for, as its group's line says it, in the order the lines come. An
empty cause: each warning is its own line (its message says what and where)."""

_UNITS = {"steal": "trial(s)", "interfered": "trial(s)"}


def grouped_lines(
    flags: Sequence[Flagged], *, unit: str = "case(s)", most: int = 8, of: int | None = None
) -> list[str]:
    """One line per cause (rich markup, data escaped): "{cause} in {n} {unit}: subject (detail), ... and k
    more — {fix}" (the first warning's fix), at most `most` subjects named; causes in CAUSES' order. `of`:
    how many subjects there are in all; a cause that hits every one of them says "in all {of}" instead of
    naming them."""
    by_code: dict[str, list[Flagged]] = defaultdict(list)
    for f in flags:
        by_code[f.warning.code].append(f)
    lines = []
    for code in [*CAUSES, *(c for c in by_code if c not in CAUSES)]:
        group = by_code.get(code)
        if not group:
            continue
        cause = CAUSES.get(code, code)
        if not cause:
            lines += [f"[yellow]{escape(f.warning.message)}[/] — {escape(f.warning.fix)}" for f in group]
            continue
        fix = escape(group[0].warning.fix)
        if of is not None and len({f.subject for f in group}) >= of and code not in _UNITS:
            lines.append(f"[yellow]{escape(cause)} in all {of} {unit}[/] — {fix}")
            continue
        named = [f"{f.subject} ({f.detail})" if f.detail else f.subject for f in group[:most]]
        more = f" and {len(group) - most} more" if len(group) > most else ""
        total = sum(f.count for f in group)
        lines.append(
            f"[yellow]{escape(cause)} in {total} {_UNITS.get(code, unit)}: {escape(', '.join(named))}{more}[/] — {fix}"
        )
    return lines


_RUN_CODES = (
    "high-cv",
    "outlier",
    "link-late",
    "steal",
    "interfered",
    "generator-bound",
    "cross-check",
    "not-cross-checked",
    "common-limit",
    "start-skew",
    "clients-lost",
    "host-saturated",
    "too-few-repetitions",
)


def _run_flag(s: CaseSummary, w: StabilityWarning, show_profile: bool) -> Flagged:
    name = _case_name(s, show_profile)
    if w.code == "high-cv":
        return Flagged(name, w, f"{s.throughput.cv:.0%}")
    if w.code == "link-late":
        return Flagged(name, w, _late_ms(w))
    if w.code == "steal":
        top, trials = _steal(w)
        return Flagged(name, w, f"up to {top}", trials)
    if w.code == "interfered":
        m = re.search(r": (\d+) of \d+ trial\(s\) interfered with: (.*)$", w.message)
        return Flagged(name, w, m.group(2) if m else "", int(m.group(1)) if m else 1)
    return Flagged(name, w)


def warning_lines(summaries: list[CaseSummary]) -> list[str]:
    """Failed trials (one line per distinct error), then the stability warnings grouped by cause
    (grouped_lines), so a noisy run gives two lines, not two per case."""
    show_profile = len({s.case.profile for s in summaries}) > 1
    lines = []
    for s in summaries:
        for e in s.errors:
            lines.append(f"[red]✗ {escape(_case_name(s, show_profile))}: {escape(e)}[/]")
    flags = [_run_flag(s, w, show_profile) for s in summaries for w in s.warnings if w.code in _RUN_CODES]
    return lines + grouped_lines(flags)


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
            # a cell of several figures ("a / b") may fold at its separators when the table is too wide
            table.add_column(col.header, justify="right", no_wrap="|" not in col.key)
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
            for host, host_cells in r.hosts:  # a fleet over several client hosts: each host's own figures
                table.add_row(
                    f"  [dim]└ {escape(host)}[/]",
                    *([""] if show_profile else []),
                    *["" for _ in ht.axes],
                    *host_cells,
                    "",
                )
        out.append(table)
    return out


def trial_headline(rec: TrialRecord) -> str:
    """One trial's result in a few words, for the progress lines (its workload's own headline)."""
    w = workloads.REGISTRY.get(rec.workload)
    return w.headline(rec) if w is not None else f"{mbit(rec.metrics.get(THROUGHPUT.name) or 0.0)} Mbit/s"
