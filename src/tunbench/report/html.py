"""The HTML report: one self-contained page (plotly.js embedded, no CDN) that works offline.

Per run: stability warnings, a summary table, throughput per case with CI error bars, ratio to direct, CPU cost
per role and bits per CPU-second, per-second throughput of every trial, the emulated bottleneck queues'
occupancy over time, fairness across parallel flows (Jain's index), latency CDFs, the loaded RTT taken apart
into propagation, queue and host (rrul through the emulator) and WAN profile parameters when present, a "Many
clients" section for the multi-client workloads (``clients``: scaling curves against the client count;
``storm``: time-to-ready CDFs and a p50/p99/success table; these workloads are kept out of the per-case
throughput and fairness charts), and the run's provenance.

Pure: runs in, text out (plotly builds the figures; nothing is read from the clock or the disk except the
template and plotly.js, both installed files).
"""

from __future__ import annotations

import html
import itertools
import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from importlib import resources
from string import Template
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from tunbench import __version__, workloads
from tunbench.link.emulator import QUEUE_SERIES
from tunbench.report.common import (
    baseline_line,
    flows_text,
    fmt_bps,
    fmt_num,
    host_lines,
    is_num,
    median_or_none,
    trial_jain,
)
from tunbench.report.counted import work_table_html
from tunbench.report.headlines import AXES, headline_tables
from tunbench.report.interference import line as interference_line
from tunbench.report.summary import BASELINE, ROLES, CaseSummary, summarize_trials
from tunbench.results import CaseKey, RunRecord, TrialRecord
from tunbench.units import parse_duration_s

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
DIRECT_COLOR = "#7f7f7f"
ROLE_COLORS = {"client": "#1f77b4", "server": "#ff7f0e"}
CHART_HEIGHT = 420
PLOTLY_FOOTER = (
    "Made by tunbench $version. Self-contained: the plotting library is embedded, the page works offline.\n"
    "Hover a chart for exact values; click legend entries to hide series."
)
_CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"format": "svg"}}


def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


# ---- figure helpers ----------------------------------------------------------------------------


def _colors(labels: Iterable[tuple[str, str]]) -> dict[str, str]:
    """label -> color, stable in first-seen order; the direct baseline is always grey."""
    out: dict[str, str] = {}
    i = 0
    for label, tunnel in labels:
        if label in out:
            continue
        if tunnel == BASELINE:
            out[label] = DIRECT_COLOR
        else:
            out[label] = PALETTE[i % len(PALETTE)]
            i += 1
    return out


def _rate_unit(values: Iterable[float | None]) -> tuple[float, str]:
    top = max((abs(v) for v in values if v is not None and math.isfinite(v)), default=0.0)
    return (1e9, "Gbit/s") if top >= 2e9 else (1e6, "Mbit/s") if top >= 2e6 else (1e3, "kbit/s")


def _group(case: CaseKey) -> str:
    parts = [case.profile, case.direction, flows_text(case.flows)]
    if case.workload != "iperf3":
        parts.insert(1, case.workload)
    return " · ".join(parts)


def _layout(fig: go.Figure, title: str, xtitle: str, ytitle: str, **kw: Any) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0.01, "xanchor": "left"},
        template="plotly_white",
        height=kw.pop("height", CHART_HEIGHT),
        margin={"l": 70, "r": 20, "t": 90, "b": 60},
        legend={
            "orientation": "h",
            "yanchor": "bottom",
            "y": 1.02,
            "xanchor": "left",
            "x": 0.0,
            "traceorder": "normal",
        },
        hoverlabel={"namelength": -1},
        **kw,
    )
    fig.update_xaxes(title_text=xtitle)
    fig.update_yaxes(title_text=ytitle, rangemode="tozero")
    return fig


LOG_SPAN = 20.0
"""A bar chart whose bars span at least this factor (largest / smallest) gets a log axis: next to direct's
20 Gbit/s and the L4 relays, the VPNs people choose between (0.3-0.8 Gbit/s) would be a few pixels high."""


def _log_if_wide(fig: go.Figure, values: Iterable[float], unit: str) -> go.Figure:
    """A log y axis with labelled 1-2-5 ticks when `values` span LOG_SPAN or more (their axis title says so)."""
    pos = [v for v in values if math.isfinite(v) and v > 0]
    if pos and max(pos) / min(pos) >= LOG_SPAN:
        lo, hi = math.log10(min(pos) / 1.5), math.log10(max(pos) * 1.5)
        ticks = [m * 10.0**e for e in range(math.floor(lo), math.ceil(hi) + 1) for m in (1, 2, 5)]
        ticks = [t for t in ticks if lo <= math.log10(t) <= hi]
        fig.update_yaxes(
            type="log",
            range=[lo, hi],
            tickvals=ticks,
            ticktext=[f"{t:g}" for t in ticks],
            title_text=f"{unit}, log scale",
            rangemode="normal",
        )
    return fig


def _div(fig: go.Figure, div_id: str) -> str:
    body = pio.to_html(
        fig, full_html=False, include_plotlyjs=False, div_id=div_id, config=_CONFIG, default_height=CHART_HEIGHT
    )
    return f'<div class="chart">{body}</div>'


def _err(med: float, lo: float, hi: float, scale: float) -> tuple[float | None, float | None]:
    if not (math.isfinite(lo) and math.isfinite(hi) and math.isfinite(med)):
        return None, None
    return (hi - med) / scale, (med - lo) / scale


# ---- charts ------------------------------------------------------------------------------------


def fig_throughput(summaries: list[CaseSummary], colors: dict[str, str]) -> go.Figure:
    ok = [s for s in summaries if s.n]
    scale, unit = _rate_unit(v for s in ok for v in s.values_bps)
    fig = go.Figure()
    for label in colors:
        rows = [s for s in ok if s.case.label == label]
        if not rows:
            continue
        errs = [_err(s.throughput.median, s.throughput.ci_low, s.throughput.ci_high, scale) for s in rows]
        x = [[_group(s.case) for s in rows], [label] * len(rows)]
        fig.add_bar(
            x=x,
            y=[s.throughput.median / scale for s in rows],
            name=label,
            legendgroup=label,
            marker_color=colors[label],
            error_y={"type": "data", "array": [e[0] for e in errs], "arrayminus": [e[1] for e in errs]},
            customdata=[[s.n, s.throughput.ci_coverage * 100 if is_num(s.throughput.ci_coverage) else 0] for s in rows],
            hovertemplate=f"%{{x}}<br>median %{{y:.3g}} {unit}<br>n=%{{customdata[0]}}, "
            "CI coverage %{customdata[1]:.0f}%<extra>%{fullData.name}</extra>",
        )
        pts_x: list[list[str]] = [[], []]
        pts_y: list[float] = []
        for s in rows:
            for v in s.values_bps:
                pts_x[0].append(_group(s.case))
                pts_x[1].append(label)
                pts_y.append(v / scale)
        fig.add_scatter(
            x=pts_x,
            y=pts_y,
            mode="markers",
            marker={"color": "rgba(0,0,0,0.55)", "size": 6, "symbol": "circle-open"},
            name=f"{label} repetitions",
            legendgroup=label,
            showlegend=False,
            hovertemplate=f"repetition: %{{y:.3g}} {unit}<extra>{_e(label)}</extra>",
        )
    _layout(
        fig,
        "Throughput per case: median, CI of the median at its stated coverage (error bars), each repetition (circles)",
        "case (profile · direction · flows) / tunnel",
        f"throughput ({unit})",
        barmode="overlay",
    )
    return _log_if_wide(fig, (v / scale for s in ok for v in s.values_bps), f"throughput ({unit})")


def fig_ratio(summaries: list[CaseSummary], colors: dict[str, str]) -> go.Figure | None:
    rows = [s for s in summaries if s.ratio_to_direct is not None and is_num(s.ratio_to_direct.value)]
    if not rows:
        return None
    fig = go.Figure()
    for label in colors:
        mine = [s for s in rows if s.case.label == label]
        if not mine:
            continue
        rs = [s.ratio_to_direct for s in mine if s.ratio_to_direct is not None]
        errs = [_err(r.value, r.ci_low, r.ci_high, 1.0) for r in rs]
        fig.add_bar(
            x=[[_group(s.case) for s in mine], [label] * len(mine)],
            y=[r.value for r in rs],
            name=label,
            marker_color=colors[label],
            error_y={"type": "data", "array": [e[0] for e in errs], "arrayminus": [e[1] for e in errs]},
            hovertemplate="%{x}<br>%{y:.3f}× direct<extra>%{fullData.name}</extra>",
        )
    fig.add_hline(y=1.0, line_dash="dash", line_color=DIRECT_COLOR, annotation_text="direct = 1×")
    _layout(
        fig,
        "Throughput relative to the direct path (no tunnel), with a distribution-free CI (coverage in the table)",
        "case / tunnel",
        "ratio to direct (×)",
        barmode="overlay",
    )
    return _log_if_wide(
        fig, [1.0, *(s.ratio_to_direct.value for s in rows if s.ratio_to_direct)], "ratio to direct (×)"
    )


def _role_fig(
    summaries: list[CaseSummary], attr: str, scale: float, title: str, ytitle: str, fmt: str
) -> go.Figure | None:
    rows = [s for s in summaries if s.tunnel != BASELINE and any(is_num(getattr(s.roles[r], attr)) for r in ROLES)]
    if not rows:
        return None
    fig = go.Figure()
    x = [[_group(s.case) for s in rows], [s.case.label for s in rows]]
    for role in ROLES:
        ys = [getattr(s.roles[role], attr) for s in rows]
        if not any(is_num(y) for y in ys):
            continue
        fig.add_bar(
            x=x,
            y=[y / scale if is_num(y) else None for y in ys],
            name=f"{role} side",
            showlegend=True,
            marker_color=ROLE_COLORS[role],
            hovertemplate=f"%{{x}}<br>%{{y:{fmt}}}<extra>{role}</extra>",
        )
    return _layout(fig, title, "case / tunnel", ytitle, barmode="group")


def fig_cpu(summaries: list[CaseSummary]) -> go.Figure | None:
    return _role_fig(
        summaries,
        "cpu_pct",
        1.0,
        "CPU cost of the tunnel processes (median user+system time over the measured window)",
        "CPU (% of one core)",
        ".1f",
    )


def fig_bits_per_cpu(summaries: list[CaseSummary]) -> go.Figure | None:
    return _role_fig(
        summaries,
        "bits_per_cpu_s",
        1e6,
        "Efficiency: throughput per CPU-second of the tunnel processes (higher is cheaper)",
        "Mbit per CPU-second",
        ",.0f",
    )


def link_events(t: TrialRecord) -> list[tuple[float, float, str]]:
    """The profile's events on a trial's series time axis (seconds since the measurement's start, which came
    `series_t0_s` after the workload's start, when the events started; a trial stored without it: --omit
    after), as (from, to, what); a change or a rebind lasts no time."""
    events = (t.params.get("profile") or {}).get("events") or []
    origin = t.metrics.get("series_t0_s")
    if origin is None or not math.isfinite(origin):
        origin = float((t.params.get("workload") or {}).get("omit_s") or 0.0)
    out: list[tuple[float, float, str]] = []
    for e in events:
        try:
            at = parse_duration_s(str(e.get("at"))) - origin
            span = parse_duration_s(str(e["outage"])) if e.get("outage") else 0.0
        except ValueError:
            continue
        what = "outage" if span else f"rebind ({e['rebind']})" if e.get("rebind") else "change"
        out.append((at, at + span, what))
    return out


def _mark_events(fig: go.Figure, trials: list[TrialRecord]) -> None:
    """Shade each outage and draw a line at each other event of the trials' profiles, on every row."""
    for x0, x1, what in sorted({ev for t in trials for ev in link_events(t)}):
        if x1 > x0:
            fig.add_vrect(x0=x0, x1=x1, fillcolor="#888", opacity=0.18, line_width=0, row="all", col=1)
        else:
            fig.add_vline(x=x0, line_dash="dash", line_color="#888", row="all", col=1)
        fig.add_annotation(x=x0, y=1.0, yref="paper", text=what, showarrow=False, xanchor="left", font_size=10)


def fig_timeseries(trials: list[TrialRecord], colors: dict[str, str], group: str) -> go.Figure:
    """One row per tunnel (own y scale, so a slow tunnel's stalls stay visible next to direct), one line per trial
    and direction: its `throughput_bps.<dir>` series only (a trial's other series are not rates)."""
    present = {t.label for t in trials}
    labels = [label for label in colors if label in present] + sorted(present - set(colors))
    series = [(t, name, pts) for t in trials for name, pts in sorted(t.series.items()) if pts and _is_throughput(name)]
    scale, unit = _rate_unit(v for _, _, pts in series for _, v in pts)
    fig = make_subplots(
        rows=len(labels), cols=1, shared_xaxes=True, vertical_spacing=0.12 / max(1, len(labels) - 1) + 0.04,
        subplot_titles=labels,
    )  # fmt: skip
    for t, name, pts in series:
        d = name.rsplit(".", 1)[-1]
        fig.add_scatter(
            x=[p[0] for p in pts],
            y=[p[1] / scale for p in pts],
            mode="lines+markers",
            line={
                "color": colors.get(t.label, DIRECT_COLOR),
                "width": 1.5,
                "dash": "dot" if t.direction == "bidir" and d == "down" else "solid",
            },
            marker={"size": 5},
            name=f"{t.label} rep {t.repetition} ({d})",
            showlegend=False,
            hovertemplate=f"{_e(t.label)} rep {t.repetition} ({d})<br>t=%{{x:.1f}} s: %{{y:.3g}} {unit}<extra></extra>",
            row=labels.index(t.label) + 1,
            col=1,
        )
    _mark_events(fig, trials)
    fig = _layout(
        fig,
        f"Per-second throughput — {group}<br><sub>one line per repetition: look for warm-up and stalls"
        f"{'; grey: the link’s events' if any(link_events(t) for t in trials) else ''}</sub>",
        "",
        unit,
        height=110 + 170 * len(labels),
    )
    fig.update_layout(margin_t=110)
    fig.update_xaxes(title_text="time since the start of the measurement (s)", row=len(labels), col=1)
    fig.update_yaxes(title_text=f"throughput ({unit})", row=(len(labels) + 1) // 2, col=1)
    for i in range(1, len(labels) + 1):
        if i != (len(labels) + 1) // 2:
            fig.update_yaxes(title_text="", row=i, col=1)
    return fig


def _is_throughput(series_name: str) -> bool:
    return series_name.startswith("throughput_bps.")


def _is_queue(series_name: str) -> bool:
    return series_name.startswith(f"{QUEUE_SERIES}.")


DIRECTION_TITLES = {"up": "up (client → server)", "down": "down (server → client)"}


def _size_unit(values: Iterable[float]) -> tuple[float, str]:
    top = max((abs(v) for v in values if math.isfinite(v)), default=0.0)
    return (2**20, "MiB") if top >= 2 * 2**20 else (2**10, "KiB") if top >= 2 * 2**10 else (1.0, "bytes")


def fig_queue(trials: list[TrialRecord], colors: dict[str, str], group: str) -> go.Figure:
    """The emulator's bottleneck queue over the measured window (`queue_bytes.<dir>`: the most bytes waiting
    in each window, at the window's end): one row per direction, one line per trial."""
    dirs = [d for d in ("up", "down") if any(t.series.get(f"{QUEUE_SERIES}.{d}") for t in trials)]
    pts_of = {(t.seq, d): t.series.get(f"{QUEUE_SERIES}.{d}") or [] for t in trials for d in dirs}
    scale, unit = _size_unit(v for pts in pts_of.values() for _, v in pts)
    steps = [b[0] - a[0] for pts in pts_of.values() for a, b in itertools.pairwise(pts) if b[0] > a[0]]
    order = list(colors)
    fig = make_subplots(
        rows=len(dirs), cols=1, shared_xaxes=True, vertical_spacing=0.12,
        subplot_titles=[DIRECTION_TITLES[d] for d in dirs],
    )  # fmt: skip
    shown: set[str] = set()
    cut = False
    for t in sorted(trials, key=lambda t: (order.index(t.label) if t.label in order else len(order), t.repetition)):
        for row, d in enumerate(dirs, start=1):
            pts = pts_of[(t.seq, d)]
            if not pts:
                continue
            short = bool(t.metrics.get(f"link.{d}.queue_series_truncated"))
            cut |= short
            fig.add_scatter(
                x=[p[0] for p in pts],
                y=[p[1] / scale for p in pts],
                mode="lines",
                line={"color": colors.get(t.label, DIRECT_COLOR), "width": 1.5, "shape": "vh"},
                name=t.label,
                legendgroup=t.label,
                showlegend=t.label not in shown,
                hovertemplate=f"{_e(t.label)} rep {t.repetition} ({d})<br>t=%{{x:.1f}} s: %{{y:.3g}} {unit}"
                + (" (the emulator's record ends early)" if short else "")
                + "<extra></extra>",
                row=row,
                col=1,
            )
            shown.add(t.label)
    _mark_events(fig, trials)
    window = f"{min(steps) * 1e3:.0f} ms " if steps else ""
    notes = [
        f"the most bytes waiting in the emulator's bottleneck queue in each {window}window",
        "one line per repetition",
    ]
    if cut:
        notes.append("some records end before the measured window does")
    if any(link_events(t) for t in trials):
        notes.append("grey: the link’s events")
    fig = _layout(
        fig,
        f"Bottleneck queue occupancy — {group}<br><sub>{'; '.join(notes)}</sub>",
        "",
        f"queue ({unit})",
        height=170 + 200 * len(dirs),
    )
    # the title at the top, the legend above the first row's title (32 px over the plot area)
    legend_y = 1.0 + 32 / (200 * len(dirs) - 30)
    fig.update_layout(margin_t=140, title_y=1.0, title_yanchor="top", title_pad_t=24, legend_y=legend_y)
    fig.update_xaxes(title_text="time since the start of the measurement (s)", row=len(dirs), col=1)
    return fig


# the loaded RTT's parts (monitor/crosscheck.rtt_checks): metric, name, colour
RTT_PARTS = (
    ("latency.idle_p50_ms", "propagation (idle RTT)", "#6baed6"),
    ("latency.loaded_queue_ms", "bottleneck queues", "#fd8d3c"),
    ("check.rtt.residual_ms", "host / residual", "#969696"),
)
RTT_LOADED = "latency.loaded_p50_ms"


def rtt_parts(trials: list[TrialRecord]) -> dict[CaseKey, dict[str, list[float]]]:
    """Per case, the parts, the loaded RTT p50 and `check.rtt.ok` (where judged) of every successful trial
    that has the parts and the loaded RTT."""
    out: dict[CaseKey, dict[str, list[float]]] = {}
    keys = (RTT_LOADED, *(k for k, _, _ in RTT_PARTS))
    for t in trials:
        if t.status != "ok" or not all(is_num(t.metrics.get(k)) for k in keys):
            continue
        case = out.setdefault(t.case, defaultdict(list))
        for k in (*keys, "check.rtt.ok"):
            v = t.metrics.get(k)
            if v is not None and is_num(v):
                case[k].append(v)
    return out


def _rtt_judged(oks: list[float], n: int) -> str:
    if not oks:
        return "not judged (no emulated bottleneck both ways)"
    return f"{sum(1 for v in oks if v)} of {len(oks)} within the tolerance" + (
        f" ({n - len(oks)} not judged)" if len(oks) < n else ""
    )


def fig_rtt_parts(trials: list[TrialRecord], colors: dict[str, str]) -> go.Figure | None:
    """The loaded RTT stacked into propagation (the idle RTT), the emulator's bottleneck queues (median
    sojourn, up + down) and the rest (the host's share, the residual): one bar per case, each part the
    median over the case's successful repetitions; a negative residual is drawn below zero. A diamond marks
    the measured loaded RTT p50 (its median): the parts' medians need not add up to it exactly."""
    data = rtt_parts(trials)
    if not data:
        return None
    order = list(colors)
    cases = sorted(data, key=lambda c: (_group(c), order.index(c.label) if c.label in order else len(order)))
    x = [[_group(c) for c in cases], [c.label for c in cases]]
    med = {c: {k: median_or_none(list(v)) or 0.0 for k, v in data[c].items() if k != "check.rtt.ok"} for c in cases}
    n = [len(data[c][RTT_LOADED]) for c in cases]
    fig = go.Figure()
    for key, name, color in RTT_PARTS:
        custom: list[list[object]] = []
        for c, k in zip(cases, n, strict=True):
            note = ""
            if key == "check.rtt.residual_ms":
                note = f"<br>cross-check: {_rtt_judged(data[c]['check.rtt.ok'], k)}"
                if med[c][key] < 0:
                    note += "<br>negative: the idle RTT and the queues account for more than the loaded RTT"
            custom.append([k, note])
        fig.add_bar(
            x=x,
            y=[med[c][key] for c in cases],
            name=name,
            marker_color=color,
            customdata=custom,
            hovertemplate=f"%{{x}}<br>{_e(name)}: %{{y:.2f}} ms (median of %{{customdata[0]}})"
            "%{customdata[1]}<extra></extra>",
        )
    fig.add_scatter(
        x=x,
        y=[med[c][RTT_LOADED] for c in cases],
        mode="markers",
        marker={"symbol": "diamond", "size": 10, "color": "#000", "line": {"color": "#fff", "width": 1}},
        name="loaded RTT p50 (measured)",
        customdata=[[k, sum(med[c][p] for p, _, _ in RTT_PARTS)] for c, k in zip(cases, n, strict=True)],
        hovertemplate="%{x}<br>loaded RTT p50: %{y:.2f} ms (median of %{customdata[0]})<br>"
        "the parts' medians add up to %{customdata[1]:.2f} ms<extra></extra>",
    )
    negative = any(med[c]["check.rtt.residual_ms"] < 0 for c in cases)
    fig = _layout(
        fig,
        "Latency under load: the loaded RTT p50 as propagation, queue and host"
        "<br><sub>propagation: the idle RTT p50; queues: the emulator's bottleneck queues' median sojourn, up + "
        "down;<br>host / residual: the loaded p50 less both; medians over the successful repetitions"
        + ("; a negative residual is drawn below zero" if negative else "")
        + "</sub>",
        "case / tunnel",
        "round-trip time (ms)",
        barmode="relative",
        height=CHART_HEIGHT + 40,
    )
    fig.update_layout(margin_t=140, title_y=1.0, title_yanchor="top", title_pad_t=24)
    if negative:
        fig.add_hline(y=0.0, line_color="#444", line_width=1)
    return fig


def fig_fairness(summaries: list[CaseSummary], trials: list[TrialRecord], colors: dict[str, str]) -> go.Figure | None:
    by_case: dict[CaseKey, list[float]] = defaultdict(list)
    for t in trials:
        j = trial_jain(t) if t.status == "ok" and t.flows > 1 else None
        if j is not None:
            by_case[t.case].append(j)
    rows = [s for s in summaries if by_case.get(s.case)]
    if not rows:
        return None
    fig = go.Figure()
    for label in colors:
        mine = [s for s in rows if s.case.label == label]
        if not mine:
            continue
        med = [median_or_none(list(by_case[s.case])) or 0.0 for s in mine]
        lo = [min(by_case[s.case]) for s in mine]
        hi = [max(by_case[s.case]) for s in mine]
        fig.add_bar(
            x=[[_group(s.case) for s in mine], [label] * len(mine)],
            y=med,
            name=label,
            marker_color=colors[label],
            error_y={
                "type": "data",
                "array": [h - m for h, m in zip(hi, med, strict=True)],
                "arrayminus": [m - lo_ for m, lo_ in zip(med, lo, strict=True)],
            },
            hovertemplate="%{x}<br>Jain index %{y:.3f} (median over repetitions)<extra>%{fullData.name}</extra>",
        )
    fig = _layout(
        fig,
        "Fairness across parallel flows: Jain's index (1 = equal shares, 1/n = one flow takes all); bars: min–max",
        "case / tunnel",
        "Jain's fairness index",
        barmode="overlay",
    )
    fig.update_yaxes(range=[0, 1.05])
    return fig


def fig_flows(trials: list[TrialRecord], colors: dict[str, str]) -> go.Figure | None:
    pts: dict[str, tuple[list[list[str]], list[float]]] = {}
    for t in trials:
        if t.status != "ok" or t.flows < 2:
            continue
        x, y = pts.setdefault(t.label, ([[], []], []))
        for _stream, direction, bps, _r in t.streams:
            if is_num(bps):
                x[0].append(f"{t.profile} · {direction} · {flows_text(t.flows)}")
                x[1].append(t.label)
                y.append(bps)
    if not pts:
        return None
    scale, unit = _rate_unit(v for _, ys in pts.values() for v in ys)
    fig = go.Figure()
    for label in sorted(pts, key=lambda k: list(colors).index(k) if k in colors else len(colors)):
        x, y = pts[label]
        fig.add_box(
            x=x,
            y=[v / scale for v in y],
            name=label,
            marker_color=colors.get(label, DIRECT_COLOR),
            boxpoints="all",
            jitter=0.4,
            pointpos=0,
            hovertemplate=f"one flow: %{{y:.3g}} {unit}<extra>{_e(label)}</extra>",
        )
    return _layout(
        fig, "Throughput of each parallel flow (all repetitions)", "case / tunnel", f"per-flow throughput ({unit})"
    )


def _latency_data(trials: list[TrialRecord]) -> dict[str, list[tuple[float, float]]]:
    """label (· profile · direction when several) -> CDF points (ms, fraction).

    From raw samples in ``latency*_ms`` series when present, else from the ``latency.pNN_ms`` percentiles.
    """
    raw: dict[str, list[float]] = defaultdict(list)
    pct: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    several = len({(t.profile, t.direction) for t in trials}) > 1
    for t in trials:
        if t.status != "ok":
            continue
        key = f"{t.label} · {t.profile} · {t.direction}" if several else t.label
        for name, points in t.series.items():
            if name.startswith("latency") and name.endswith("_ms"):
                raw[key].extend(v for _, v in points if is_num(v))
        for k, v in t.metrics.items():
            if k.startswith("latency.p") and k.endswith("_ms") and v is not None and math.isfinite(v):
                try:
                    q = float(k.removeprefix("latency.p").removesuffix("_ms").replace("_", "."))
                except ValueError:
                    continue
                if 0.0 <= q <= 100.0:
                    pct[key][q].append(v)
    out: dict[str, list[tuple[float, float]]] = {}
    for label, xs in raw.items():
        xs.sort()
        out[label] = [(x, (i + 1) / len(xs)) for i, x in enumerate(xs)]
    for label, qs in pct.items():
        if label not in out:
            out[label] = [(median_or_none(list(vs)) or 0.0, q / 100.0) for q, vs in sorted(qs.items())]
    return out


def fig_latency(trials: list[TrialRecord], colors: dict[str, str]) -> go.Figure | None:
    data = _latency_data(trials)
    if not data:
        return None
    fig = go.Figure()
    for label, pts in data.items():
        fig.add_scatter(
            x=[p[0] for p in pts],
            y=[p[1] for p in pts],
            mode="lines+markers" if len(pts) < 30 else "lines",
            line={"shape": "hv", "color": colors.get(label.split(" · ")[0], DIRECT_COLOR)},
            name=label,
            hovertemplate="%{x:.3g} ms: %{y:.1%} of samples at or below<extra>%{fullData.name}</extra>",
        )
    fig = _layout(fig, "Latency CDF (round-trip time)", "round-trip time (ms)", "fraction of samples ≤ x")
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%")
    return fig


# ---- many clients (the fleet workloads: clients, storm) -----------------------------------------


def _fleet(t: TrialRecord) -> bool:
    """A trial of N clients through one server (Workload.fleet): its per-client "streams" and ready times
    are not parallel flows of one iperf3 test, so it has a section of its own."""
    w = workloads.REGISTRY.get(t.workload)
    return w is not None and w.fleet


_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")

# metric, scale, chart id suffix, title, y-axis title, hover format
_SCALING: tuple[tuple[str, float, str, str, str, str], ...] = (
    (
        "clients.udp.aggregate_bps",
        1e6,
        "udp",
        "Aggregate UDP throughput of all clients",
        "aggregate UDP (Mbit/s)",
        ".3g",
    ),
    (
        "clients.tcp.aggregate_bps",
        1e6,
        "tcp",
        "Aggregate TCP throughput of all clients",
        "aggregate TCP (Mbit/s)",
        ".3g",
    ),
    (
        "clients.udp.server_cpu_pct",
        1.0,
        "cpu",
        "Tunnel server CPU during the UDP phase",
        "server CPU (% of one core)",
        ".1f",
    ),
    (
        "clients.server_rss_bytes_per_client",
        1024.0,
        "rss",
        "Tunnel server memory per connected client (RSS growth / N)",
        "server RSS per client (KiB)",
        ",.0f",
    ),
    (
        "clients.udp.server_cpu_s_per_client",
        1.0,
        "cpu-per-client",
        "Tunnel server CPU time per client during the UDP phase",
        "server CPU per client (CPU-seconds)",
        ".3g",
    ),
)


def _mc_namer(trials: list[TrialRecord]) -> Callable[[TrialRecord], str]:
    """A line name for a trial: the label, plus profile and direction/variant when the run has several."""
    profiles = len({t.profile for t in trials}) > 1
    dirs = len({_dir_or_variant(t) for t in trials}) > 1

    def name(t: TrialRecord) -> str:
        parts = [t.label] + ([t.profile] if profiles else []) + ([_dir_or_variant(t)] if dirs else [])
        return " · ".join(parts)

    return name


def _dir_or_variant(t: TrialRecord | CaseKey) -> str:
    """A storm's variant, or a clients trial's direction: the second axis of a multi-client case."""
    return t.variant or t.direction


def fig_clients_scaling(
    trials: list[TrialRecord], colors: dict[str, str], metric: str, scale: float, title: str, ytitle: str, fmt: str
) -> go.Figure | None:
    """One line per tunnel (and direction): median over ok repetitions of ``metric`` against the client count."""
    mine = [t for t in trials if metric in t.metrics]
    name = _mc_namer(mine)
    pts: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    owner: dict[str, TrialRecord] = {}
    for t in mine:
        v = t.metrics.get(metric)
        if t.status == "ok" and v is not None and math.isfinite(v):
            pts[name(t)][t.clients].append(v)
            owner.setdefault(name(t), t)
    if not pts:
        return None
    dirs = list(dict.fromkeys(_dir_or_variant(t) for t in mine))
    fig = go.Figure()
    for key, by_n in pts.items():
        t0 = owner[key]
        ns = sorted(by_n)
        fig.add_scatter(
            x=ns,
            y=[(median_or_none(list(by_n[n])) or 0.0) / scale for n in ns],
            customdata=[len(by_n[n]) for n in ns],
            mode="lines+markers",
            line={"color": colors.get(t0.label, DIRECT_COLOR), "dash": _DASHES[dirs.index(_dir_or_variant(t0)) % 6]},
            marker={"size": 7},
            name=key,
            hovertemplate=f"%{{x}} clients: %{{y:{fmt}}} (median of %{{customdata}})<extra>%{{fullData.name}}</extra>",
        )
    fig = _layout(fig, f"{title}<br><sub>median over successful repetitions</sub>", "clients (N)", ytitle)
    fig.update_layout(margin_t=110)
    return fig


def _ready_cdf(t: TrialRecord) -> list[tuple[float, float]]:
    pts = [(x, y) for x, y in t.series.get("clients.ready_cdf") or [] if is_num(x) and is_num(y)]
    if pts:
        return sorted(pts)
    xs = sorted(v for _, v in t.series.get("clients.ready_s_by_client") or [] if is_num(v))
    return [(x, (i + 1) / len(xs)) for i, x in enumerate(xs)]


def _first_ok_per_case(trials: list[TrialRecord]) -> dict[CaseKey, TrialRecord]:
    out: dict[CaseKey, TrialRecord] = {}
    for t in sorted(trials, key=lambda t: (t.repetition, t.seq)):
        if t.status == "ok":
            out.setdefault(t.case, t)
    return out


def fig_storm_cdf(trials: list[TrialRecord], colors: dict[str, str]) -> go.Figure | None:
    """Time-to-ready CDF per tunnel × client count × variant (first successful repetition of each case)."""
    mine = [t for t in trials if _ready_cdf(t)]
    name = _mc_namer(mine)
    counts = sorted({t.clients for t in mine})
    fig = go.Figure()
    for case, t in sorted(_first_ok_per_case(mine).items(), key=lambda kv: (kv[0].label, kv[0].clients, kv[0].variant)):
        pts = _ready_cdf(t)
        if not pts:
            continue
        fig.add_scatter(
            x=[p[0] for p in pts],
            y=[p[1] for p in pts],
            mode="lines+markers" if len(pts) < 30 else "lines",
            line={
                "shape": "hv",
                "color": colors.get(t.label, DIRECT_COLOR),
                "dash": _DASHES[counts.index(case.clients) % 6],
            },
            marker={"size": 4},
            name=f"{name(t)} · N={case.clients}",
            hovertemplate="%{x:.3g} s: %{y:.1%} of clients ready<extra>%{fullData.name}</extra>",
        )
    if not fig.data:
        return None
    fig = _layout(
        fig,
        "Connection storm: time until each client's tunnel is ready (CDF)"
        "<br><sub>from the start of the storm; first successful repetition of each case</sub>",
        "time to ready (s)",
        "fraction of clients ready ≤ x",
    )
    fig.update_layout(margin_t=110)
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%")
    return fig


_NUM = ' class="num"'


def _ms(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "–"
    ms = seconds * 1e3
    return f"{ms:,.0f} ms" if abs(ms) >= 100 else f"{ms:.3g} ms"


def multi_failures_html(trials: list[TrialRecord]) -> str:
    groups: dict[CaseKey, list[TrialRecord]] = defaultdict(list)
    for t in trials:
        groups[t.case].append(t)
    items = []
    for case, ts in groups.items():
        bad = [t for t in ts if t.status != "ok"]
        if not bad:
            continue
        errs = next((t.error.splitlines()[0] for t in bad if t.error), "no error recorded")
        what = f"{case.label} · {case.profile} · {case.workload} · {_dir_or_variant(case)} · N={case.clients}"
        items.append(f"<li>{_e(what)}: {len(bad)} of {len(ts)} repetition(s) failed, e.g. {_e(errs)}</li>")
    return f'<ul class="bad">{"".join(items)}</ul>' if items else ""


def many_clients_html(trials: list[TrialRecord], pid: str) -> str:
    multi = [t for t in trials if _fleet(t)]
    if not multi:
        return ""
    colors = _colors((t.label, t.tunnel) for t in multi)
    parts = [_h3(pid, "many-clients", "Many clients"), multi_failures_html(multi)]
    if any(m in t.metrics for t in multi for m, *_ in _SCALING):
        charts = []
        for metric, scale, slug, title, ytitle, fmt in _SCALING:
            f = fig_clients_scaling(multi, colors, metric, scale, title, ytitle, fmt)
            if f is not None:
                charts.append(_div(f, f"{pid}-clients-{slug}"))
        if charts:
            parts.append('<p class="note">Scaling with the number of concurrent clients (x: N clients).</p>')
            parts.append(f'<div class="grid2">{"".join(charts)}</div>')
        else:
            parts.append('<p class="note">No successful multi-client trial to plot.</p>')
    cdf = fig_storm_cdf(multi, colors)
    if cdf is not None:
        parts.append(_div(cdf, f"{pid}-storm-cdf"))
    return "\n".join(p for p in parts if p)


def headline_tables_html(trials: list[TrialRecord], pid: str) -> str:
    """The tables of the workloads with a table of their own (Workload.columns), as the terminal shows them."""
    tables = headline_tables(trials)
    if not tables:
        return ""
    show_profile = len({r.case.profile for t in tables for r in t.rows}) > 1
    parts = [_h3(pid, "workloads", "Workloads")]
    for ht in tables:
        heads = ["tunnel", *(["profile"] if show_profile else []), *(AXES[a][1] for a in ht.axes)]
        first_num = len(heads)
        heads += [c.header for c in ht.columns] + ["n"]
        rows = []
        for r in ht.rows:
            n = f"{r.ok}" + (f' <span class="bad">({r.failed} failed)</span>' if r.failed else "")
            cells = [_e(r.case.label), *([_e(r.case.profile)] if show_profile else [])]
            cells += [_e(getattr(r.case, a)) for a in ht.axes]
            cells += (
                [_e(c) for c in r.cells] if r.ok else ['<span class="bad">failed</span>'] + [""] * (len(ht.columns) - 1)
            )
            cells.append(n)
            rows.append("<tr>" + "".join(f"<td{_NUM if i >= first_num else ''}>{c}</td>" for i, c in enumerate(cells)))
        head = "".join(f"<th{_NUM if i >= first_num else ''}>{_e(h)}</th>" for i, h in enumerate(heads))
        parts.append(f'<h4 id="{pid}-workload-{_e(ht.kind)}">{_e(ht.kind)} (median of repetitions)</h4>')
        if ht.caption:
            parts.append(f'<p class="note">{_e(ht.caption)}</p>')
        parts.append(
            f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>'
            + "</tr>".join(rows)
            + "</tr></tbody></table></div>"
        )
    return "\n".join(parts)


# ---- tables and text ---------------------------------------------------------------------------


def _ci_text(s: CaseSummary) -> str:
    t = s.throughput
    if not (math.isfinite(t.ci_low) and math.isfinite(t.ci_high)):
        return "–"
    return f"{fmt_bps(t.ci_low)} – {fmt_bps(t.ci_high)} ({t.ci_coverage:.0%} coverage)"


def _ratio_text(s: CaseSummary) -> str:
    r = s.ratio_to_direct
    if r is None or not math.isfinite(r.value):
        return "–"
    ci = f" [{r.ci_low:.2f}–{r.ci_high:.2f}]" if math.isfinite(r.ci_low) and math.isfinite(r.ci_high) else ""
    if ci and math.isfinite(r.ci_coverage):  # the interval's real coverage (90% at 3 vs 3), not a nominal 95%
        ci += f" ({r.ci_coverage:.1%} coverage)".replace(".0%", "%")
    return f"{r.value:.2f}×{ci}"


def summary_table(summaries: list[CaseSummary], trials: list[TrialRecord]) -> str:
    fair: dict[CaseKey, list[float | None]] = defaultdict(list)
    for t in trials:
        if t.status == "ok":
            fair[t.case].append(trial_jain(t))
    heads = [
        ("tunnel", ""),
        ("median", "num"),
        ("CI of median (coverage in the cell)", "num"),
        ("n", "num"),
        ("CV", "num"),
        ("vs direct [CI]", "num"),
        ("CPU client", "num"),
        ("CPU server", "num"),
        ("Mbit/CPU-s client", "num"),
        ("Mbit/CPU-s server", "num"),
        ("peak RSS client/server", "num"),
        ("retrans&shy;mits", "num"),
        ("Jain", "num"),
    ]
    rows: list[tuple[bool, list[str]]] = []
    for s in summaries:
        c, v = s.roles["client"], s.roles["server"]
        n = s.n_text + (f' <span class="bad">({s.n_failed} failed)</span>' if s.n_failed else "")
        rss = " / ".join(
            f"{x / 2**20:.0f} MiB" if is_num(x) and x else "–" for x in (c.rss_peak_bytes, v.rss_peak_bytes)
        )
        jain = median_or_none(fair.get(s.case, [])) if s.case.flows > 1 else None
        cells = [
            _e(s.case.label),
            f"<b>{_e(fmt_bps(s.throughput.median))}</b>" if s.n else '<span class="bad">failed</span>',
            _e(_ci_text(s)),
            n,
            _e(f"{s.throughput.cv:.1%}") if is_num(s.throughput.cv) else "–",
            _e(_ratio_text(s)),
            _e(f"{c.cpu_pct:.0f}%") if is_num(c.cpu_pct) else "–",
            _e(f"{v.cpu_pct:.0f}%") if is_num(v.cpu_pct) else "–",
            _e(f"{c.bits_per_cpu_s / 1e6:,.0f}") if c.bits_per_cpu_s else "–",
            _e(f"{v.bits_per_cpu_s / 1e6:,.0f}") if v.bits_per_cpu_s else "–",
            _e(rss),
            _e(fmt_num(s.retransmits, ".0f")),
            _e(fmt_num(jain, ".3f")),
        ]
        rows.append((s.tunnel == BASELINE, cells))
    # Columns with nothing in any row (e.g. server CPU of an L4 proxy that runs no server process) are dropped.
    keep = [i for i in range(len(heads)) if i < 2 or any(cells[i] not in ("–", "– / –") for _, cells in rows)]
    out = ['<div class="table-wrap"><table>', "<thead><tr>"]
    out.append("".join(f'<th class="{heads[i][1]}">{heads[i][0]}</th>' for i in keep) + "</tr></thead><tbody>")
    last = ""
    for (is_base, cells), s in zip(rows, summaries, strict=True):
        group = _group(s.case)
        if group != last:
            out.append(f'<tr class="group"><td colspan="{len(keep)}">{_e(group)}</td></tr>')
            last = group
        cls = ' class="baseline"' if is_base else ""
        out.append(f"<tr{cls}>" + "".join(f'<td class="{heads[i][1]}">{cells[i]}</td>' for i in keep) + "</tr>")
    out += ["</tbody>", "</table></div>"]
    return "\n".join(out)


_CODE_TITLES = {
    "no-data": "no measurements",
    "non-finite": "failed repetitions",
    "too-few-repetitions": "too few repetitions",
    "few-for-significance": "too few repetitions for a significance test",
    "high-cv": "high spread (coefficient of variation)",
    "outlier": "outliers",
    "mostly-zero": "zero throughput",
    "link-late": "the emulated link fell behind its schedule",
    "generator-bound": "the traffic generator was the bottleneck",
    "cross-check": "in-run cross-checks disagreed",
    "not-cross-checked": "byte cross-checks not run (not checked, not passed)",
    "steal": "a VM's neighbours took CPU (steal time)",
    "interfered": "interfered with: another tunbench run, foreign CPU or steal during the window",
}


def warnings_html(summaries: list[CaseSummary]) -> str:
    """Failures first, then stability warnings grouped by kind (one fix per kind), collapsed when long."""
    failures = [
        f'<li class="bad">{_e(s.case.label)} ({_e(_group(s.case))}) failed: {_e(err)}</li>'
        for s in summaries
        for err in s.errors
    ]
    by_code: dict[str, list[tuple[CaseSummary, str]]] = defaultdict(list)
    fixes: dict[str, str] = {}
    for s in summaries:
        for w in s.warnings:
            by_code[w.code].append((s, w.message))
            fixes.setdefault(w.code, w.fix)
    if not failures and not by_code:
        return '<p class="ok">No stability warnings: every case has enough repetitions and a low spread.</p>'
    groups = []
    for code, items in by_code.items():
        lis = "".join(f'<li>{_e(msg)} <span class="fix">({_e(_group(s.case))})</span></li>' for s, msg in items)
        title = _CODE_TITLES.get(code, code)
        groups.append(
            f'<li><b>{_e(title)}</b> in {len(items)} case(s) — <span class="fix">fix: {_e(fixes[code])}</span>'
            f"<ul>{lis}</ul></li>"
        )
    counts = ", ".join(f"{len(v)} × {_CODE_TITLES.get(k, k)}" for k, v in by_code.items())
    head = f"{len(failures)} failed trial(s); " if failures else ""
    summary = f"<summary><b>Stability warnings</b>: {_e(head + counts)}</summary>"
    failed = f"<ul>{''.join(failures)}</ul>" if failures else ""
    opened = " open" if sum(len(v) for v in by_code.values()) <= 6 else ""
    return f'<div class="warnings">{failed}<details{opened}>{summary}<ul>{"".join(groups)}</ul></details></div>'


def profiles_html(trials: list[TrialRecord]) -> str:
    seen: dict[str, dict[str, Any]] = {}
    for t in trials:
        p = t.params.get("profile")
        if isinstance(p, dict) and t.profile not in seen:
            seen[t.profile] = p
    if not seen:
        return ""
    rows = []
    for name, p in seen.items():
        link = "emulated (tunbench-link)" if p.get("emulated") else "veth (no impairment)"
        dirs = [", ".join(f"{k}={v}" for k, v in (p.get(d) or {}).items()) or "–" for d in ("up", "down")]
        rows.append(
            f"<tr><td>{_e(name)}</td><td>{_e(link)}</td><td>{_e(dirs[0])}</td><td>{_e(dirs[1])}</td>"
            f"<td>{_e(p.get('mtu') or '')}</td><td>{_e(p.get('description') or '')}</td></tr>"
        )
    head = "<tr><th>profile</th><th>link</th><th>up (client → server)</th><th>down (server → client)</th>"
    head += "<th>MTU</th><th>description</th></tr>"
    return f"<h3>WAN profiles</h3><table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def provenance_html(run: RunRecord, trials: list[TrialRecord]) -> str:
    p = run.provenance
    host, cpu, mem = p.get("host") or {}, p.get("cpu") or {}, p.get("memory") or {}
    items: list[tuple[str, str]] = [
        ("run", f"#{run.id} {run.uid}" + (f" ({run.name})" if run.name else "")),
        ("status", f"{run.status}; started {run.started_at}; finished {run.finished_at or '–'}"),
        ("tunbench", run.tunbench_version),
        ("host", f"{host.get('hostname', '?')}: Linux {host.get('kernel', '?')} {host.get('arch', '')}"),
        ("CPU", f"{cpu.get('model', '?')}, {cpu.get('cores', '?')} cores, {cpu.get('freq_mhz', '?')} MHz"),
    ]
    if mem.get("total_bytes"):
        items.append(("memory", f"{mem['total_bytes'] / 2**30:.1f} GiB"))
    load = p.get("load") or {}
    if load:
        items.append(("load at start", ", ".join(f"{k} {v:.2f}" for k, v in load.items() if is_num(v))))
    tools = p.get("tools") or {}
    if tools:
        items.append(("tools", ", ".join(f"{k} {v}" for k, v in sorted(tools.items()))))
    for label, info in sorted((p.get("tunnels") or {}).items()):
        params = ", ".join(f"{k}={v}" for k, v in (info.get("params") or {}).items())
        items.append((f"tunnel {label}", f"{info.get('adapter', label)} {info.get('version') or ''} {params}".strip()))
    for line in host_lines(p):
        name, _, rest = line.partition(": ")
        items.append((f"host {name}", rest))
    if "seed" in p:
        items.append(("seed", str(p["seed"])))
    sysctls = next((t.params.get("sysctls") for t in trials if isinstance(t.params.get("sysctls"), dict)), None)
    if sysctls:
        items.append(("namespace sysctls", ", ".join(f"{k}={v}" for k, v in sorted(sysctls.items()))))
    dl = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in items)
    scenario = f"<h3>Scenario</h3><pre>{_e(run.scenario_text)}</pre>" if run.scenario_text else ""
    resolved = json.dumps(run.scenario, indent=2, sort_keys=True, default=str)
    return (
        f'<h3>Provenance</h3><dl class="prov">{dl}</dl>{scenario}'
        f"<details><summary>Resolved scenario (after command-line overrides)</summary><pre>{_e(resolved)}</pre>"
        "</details>"
    )


# ---- page --------------------------------------------------------------------------------------


def _h3(pid: str, slug: str, text: str) -> str:
    return f'<h3 id="{pid}-sec-{slug}">{_e(text)}</h3>'


def _anchor(run: RunRecord, index: int) -> str:
    return f"run-{index}-{run.uid}"


def run_section(run: RunRecord, index: int) -> str:
    trials = sorted(run.trials, key=lambda t: t.seq)
    n_trials, n_failed = len(trials), sum(1 for t in trials if t.status != "ok")
    multi = many_clients_html(trials, f"r{index}")
    headlines = headline_tables_html(trials, f"r{index}")
    # The fleet workloads have their own section: their per-client "streams" and storm ready times are not
    # parallel flows of one iperf3 test, so they are left out of the per-case throughput/fairness charts.
    trials = [t for t in trials if not _fleet(t)]
    summaries = summarize_trials(trials)
    colors = _colors((s.case.label, s.tunnel) for s in summaries)
    pid = f"r{index}"
    title = f"Run {run.name or run.uid} (#{run.id})"
    meta = f"{n_trials} trials, {n_failed} failed · {run.status} · started {run.started_at}"
    parts = [f'<h2 id="{_e(_anchor(run, index))}">{_e(title)}</h2>', f'<p class="meta">{_e(meta)}</p>']
    if not summaries:
        body = "\n".join(p for p in (headlines, multi) if p) or "<p>No trials recorded.</p>"
        return "\n".join([*parts, body, provenance_html(run, run.trials)])
    parts += [warnings_html(summaries), _h3(pid, "summary", "Summary"), summary_table(summaries, trials)]
    if host := interference_line(run.trials):
        parts.append(f'<p class="meta" id="{pid}-interference">{_e(host)}</p>')
    if baseline := baseline_line(run.trials):
        parts.append(f'<p class="meta" id="{pid}-baseline">{_e(baseline)}</p>')
    parts += [_h3(pid, "throughput", "Throughput"), _div(fig_throughput(summaries, colors), f"{pid}-throughput")]
    ratio = fig_ratio(summaries, colors)
    if ratio is not None:
        parts.append(_div(ratio, f"{pid}-ratio"))
    cpu, eff = fig_cpu(summaries), fig_bits_per_cpu(summaries)
    if cpu is not None or eff is not None:
        parts.append(_h3(pid, "cpu", "CPU cost"))
        parts += [_div(f, f"{pid}-{name}") for f, name in ((cpu, "cpu"), (eff, "bits-per-cpu")) if f is not None]
    parts.append(work_table_html(trials, pid))
    parts += _series_section(trials, pid, "series", "Throughput over time", _is_throughput, fig_timeseries, colors)
    parts += _series_section(trials, pid, "queue", "Bottleneck queue occupancy", _is_queue, fig_queue, colors)
    fair, flows = fig_fairness(summaries, trials, colors), fig_flows(trials, colors)
    parts.append(_h3(pid, "fairness", "Fairness across parallel flows"))
    if fair is None:
        parts.append('<p class="note">Every case ran a single flow: fairness does not apply (use --flows 1,4).</p>')
    else:
        parts.append(_div(fair, f"{pid}-fairness"))
        if flows is not None:
            parts.append(_div(flows, f"{pid}-flows"))
    latency, rtt = fig_latency(trials, colors), fig_rtt_parts(trials, colors)
    if latency is not None or rtt is not None:
        parts.append(_h3(pid, "latency", "Latency"))
        parts += [_div(f, f"{pid}-{name}") for f, name in ((latency, "latency"), (rtt, "rtt-parts")) if f is not None]
    parts += [headlines, multi, profiles_html(trials), provenance_html(run, trials)]
    return "\n".join(p for p in parts if p)


def _series_section(
    trials: list[TrialRecord],
    pid: str,
    slug: str,
    heading: str,
    wanted: Callable[[str], bool],
    figure: Callable[[list[TrialRecord], dict[str, str], str], go.Figure],
    colors: dict[str, str],
) -> list[str]:
    """A heading and one chart per case group (profile · direction · flows) of the trials with a series
    `wanted` names; nothing when none has one."""
    groups: dict[str, list[TrialRecord]] = defaultdict(list)
    for t in trials:
        if any(wanted(name) and pts for name, pts in t.series.items()):
            groups[_group(t.case)].append(t)
    if not groups:
        return []
    charts = [
        _div(figure(ts, colors, group), f"{pid}-{slug}-{i}") for i, (group, ts) in enumerate(sorted(groups.items()))
    ]
    return [_h3(pid, slug, heading), f'<div class="grid2">{"".join(charts)}</div>' if len(charts) > 1 else charts[0]]


def render(runs: list[RunRecord]) -> str:
    template = Template(resources.files("tunbench.report").joinpath("templates/report.html").read_text("utf-8"))
    if len(runs) == 1:
        title = f"tunbench report: {runs[0].name or runs[0].uid}"
        toc = ""
    else:
        title = f"tunbench report: {len(runs)} runs"
        links = "".join(
            f'<li><a href="#{_e(_anchor(r, i))}">{_e(r.name or r.uid)} (#{r.id}, {_e(r.started_at)})</a></li>'
            for i, r in enumerate(runs)
        )
        toc = f"<nav><b>Runs</b><ul>{links}</ul></nav>"
    lead = (
        "Throughput is iperf3's receiver-side rate. Each case was repeated; medians are shown with a 95% confidence "
        "interval of the median (its exact coverage in parentheses when few repetitions allow less), ratios are to "
        "the direct path (no tunnel) in the same run, CPU is the tunnel processes' user+system time."
    )
    return template.substitute(
        title=_e(title),
        lead=_e(lead),
        toc=toc,
        body="\n".join(run_section(r, i) for i, r in enumerate(runs)),
        version=_e(__version__),
        plotlyjs=get_plotlyjs(),
        main_class="",
        footer=PLOTLY_FOOTER.replace("$version", _e(__version__)),
    )
