"""The per-case summary charts of a run: throughput with CI error bars, the ratio to direct, CPU per role and
bits per CPU-second (log axes when the cases span orders of magnitude).
"""

from __future__ import annotations

import plotly.graph_objects as go

from tunbench.report.common import is_num
from tunbench.report.html.base import (
    DIRECT_COLOR,
    ROLE_COLORS,
    error_bars,
    esc,
    group_title,
    layout,
    log_if_wide,
    rate_unit,
)
from tunbench.report.summary import BASELINE, ROLES, CaseSummary


def fig_throughput(summaries: list[CaseSummary], colors: dict[str, str]) -> go.Figure:
    ok = [s for s in summaries if s.n]
    scale, unit = rate_unit(v for s in ok for v in s.values_bps)
    fig = go.Figure()
    for label in colors:
        rows = [s for s in ok if s.case.label == label]
        if not rows:
            continue
        errs = [error_bars(s.throughput.median, s.throughput.ci_low, s.throughput.ci_high, scale) for s in rows]
        x = [[group_title(s.case) for s in rows], [label] * len(rows)]
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
                pts_x[0].append(group_title(s.case))
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
            hovertemplate=f"repetition: %{{y:.3g}} {unit}<extra>{esc(label)}</extra>",
        )
    layout(
        fig,
        "Throughput per case: median, CI of the median at its stated coverage (error bars), each repetition (circles)",
        "case (profile · direction · flows) / tunnel",
        f"throughput ({unit})",
        barmode="overlay",
    )
    return log_if_wide(fig, (v / scale for s in ok for v in s.values_bps), f"throughput ({unit})")


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
        errs = [error_bars(r.value, r.ci_low, r.ci_high, 1.0) for r in rs]
        fig.add_bar(
            x=[[group_title(s.case) for s in mine], [label] * len(mine)],
            y=[r.value for r in rs],
            name=label,
            marker_color=colors[label],
            error_y={"type": "data", "array": [e[0] for e in errs], "arrayminus": [e[1] for e in errs]},
            hovertemplate="%{x}<br>%{y:.3f}× direct<extra>%{fullData.name}</extra>",
        )
    fig.add_hline(y=1.0, line_dash="dash", line_color=DIRECT_COLOR, annotation_text="direct = 1×")
    layout(
        fig,
        "Throughput relative to the direct path (no tunnel), with a distribution-free CI (coverage in the table)",
        "case / tunnel",
        "ratio to direct (×)",
        barmode="overlay",
    )
    return log_if_wide(fig, [1.0, *(s.ratio_to_direct.value for s in rows if s.ratio_to_direct)], "ratio to direct (×)")


def _role_fig(
    summaries: list[CaseSummary], attr: str, scale: float, title: str, ytitle: str, fmt: str
) -> go.Figure | None:
    rows = [s for s in summaries if s.tunnel != BASELINE and any(is_num(getattr(s.roles[r], attr)) for r in ROLES)]
    if not rows:
        return None
    fig = go.Figure()
    x = [[group_title(s.case) for s in rows], [s.case.label for s in rows]]
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
    return layout(fig, title, "case / tunnel", ytitle, barmode="group")


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
