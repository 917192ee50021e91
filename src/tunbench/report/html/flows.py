"""Fairness across the parallel flows of a case (Jain's index) and each flow's share."""

from __future__ import annotations

from collections import defaultdict

import plotly.graph_objects as go

from tunbench.report.common import (
    flows_text,
    is_num,
    median_or_none,
    trial_jain,
)
from tunbench.report.html.base import DIRECT_COLOR, esc, group_title, layout, rate_unit
from tunbench.report.summary import CaseSummary
from tunbench.results import CaseKey, TrialRecord


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
            x=[[group_title(s.case) for s in mine], [label] * len(mine)],
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
    fig = layout(
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
    scale, unit = rate_unit(v for _, ys in pts.values() for v in ys)
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
            hovertemplate=f"one flow: %{{y:.3g}} {unit}<extra>{esc(label)}</extra>",
        )
    return layout(
        fig, "Throughput of each parallel flow (all repetitions)", "case / tunnel", f"per-flow throughput ({unit})"
    )
