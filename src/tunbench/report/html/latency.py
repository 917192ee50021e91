"""Latency charts: CDFs of every latency series, and the loaded RTT taken apart into propagation, queue
and host (rrul through the emulator).
"""

from __future__ import annotations

import math
from collections import defaultdict

import plotly.graph_objects as go

from tunbench.metrics import latency as lat
from tunbench.monitor import crosscheck
from tunbench.report.common import (
    is_num,
    median_or_none,
)
from tunbench.report.html.base import CHART_HEIGHT, DIRECT_COLOR, esc, group_title, layout
from tunbench.results import CaseKey, TrialRecord

RESIDUAL, RTT_OK = crosscheck.RTT_RESIDUAL.name, crosscheck.RTT_OK.name
RTT_PARTS = (
    (lat.PHASE.key(phase="idle", q=50), "propagation (idle RTT)", "#6baed6"),
    (lat.LOADED_QUEUE.name, "bottleneck queues", "#fd8d3c"),
    (RESIDUAL, "host / residual", "#969696"),
)


RTT_LOADED = lat.PHASE.key(phase="loaded", q=50)


def rtt_parts(trials: list[TrialRecord]) -> dict[CaseKey, dict[str, list[float]]]:
    """Per case, the parts, the loaded RTT p50 and `check.rtt.ok` (where judged) of every successful trial
    that has the parts and the loaded RTT."""
    out: dict[CaseKey, dict[str, list[float]]] = {}
    keys = (RTT_LOADED, *(k for k, _, _ in RTT_PARTS))
    for t in trials:
        if t.status != "ok" or not all(is_num(t.metrics.get(k)) for k in keys):
            continue
        case = out.setdefault(t.case, defaultdict(list))
        for k in (*keys, RTT_OK):
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
    cases = sorted(data, key=lambda c: (group_title(c), order.index(c.label) if c.label in order else len(order)))
    x = [[group_title(c) for c in cases], [c.label for c in cases]]
    med = {c: {k: median_or_none(list(v)) or 0.0 for k, v in data[c].items() if k != RTT_OK} for c in cases}
    n = [len(data[c][RTT_LOADED]) for c in cases]
    fig = go.Figure()
    for key, name, color in RTT_PARTS:
        custom: list[list[object]] = []
        for c, k in zip(cases, n, strict=True):
            note = ""
            if key == RESIDUAL:
                note = f"<br>cross-check: {_rtt_judged(data[c][RTT_OK], k)}"
                if med[c][key] < 0:
                    note += "<br>negative: the idle RTT and the queues account for more than the loaded RTT"
            custom.append([k, note])
        fig.add_bar(
            x=x,
            y=[med[c][key] for c in cases],
            name=name,
            marker_color=color,
            customdata=custom,
            hovertemplate=f"%{{x}}<br>{esc(name)}: %{{y:.2f}} ms (median of %{{customdata[0]}})"
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
    negative = any(med[c][RESIDUAL] < 0 for c in cases)
    fig = layout(
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


def _latency_data(trials: list[TrialRecord]) -> dict[str, list[tuple[float, float]]]:
    """label (· profile · direction when several) -> CDF points (ms, fraction).

    From raw samples in ``latency*fmt_ms`` series when present, else from the ``latency.pNN_ms`` percentiles.
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
            if lat.LATENCY.matches(k) and v is not None and math.isfinite(v):
                q = float(lat.LATENCY.values(k)["q"])
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
    fig = layout(fig, "Latency CDF (round-trip time)", "round-trip time (ms)", "fraction of samples ≤ x")
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%")
    return fig
