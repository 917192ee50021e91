"""The HTML pages' shared parts: colours, escaping, a figure's layout and its <div>, log axes where values span
orders of magnitude, error bars, units, the page's small HTML pieces.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from tunbench.report.summary import BASELINE
from tunbench.results import CaseKey
from tunbench.workloads import case_title

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


DIRECT_COLOR = "#7f7f7f"


ROLE_COLORS = {"client": "#1f77b4", "server": "#ff7f0e"}


CHART_HEIGHT = 420


PLOTLY_FOOTER = (
    "Made by tunbench $version. Self-contained: the plotting library is embedded, the page works offline.\n"
    "Hover a chart for exact values; click legend entries to hide series."
)


PLOT_CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"format": "svg"}}


def esc(x: object) -> str:
    return html.escape(str(x), quote=True)


def label_colors(labels: Iterable[tuple[str, str]]) -> dict[str, str]:
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


def rate_unit(values: Iterable[float | None]) -> tuple[float, str]:
    top = max((abs(v) for v in values if v is not None and math.isfinite(v)), default=0.0)
    return (1e9, "Gbit/s") if top >= 2e9 else (1e6, "Mbit/s") if top >= 2e6 else (1e3, "kbit/s")


def group_title(case: CaseKey) -> str:
    """The case without its tunnel ('lan · up · 1 flow'): where a chart shows the tunnels side by side."""
    return case_title(case, label=False)


def layout(fig: go.Figure, title: str, xtitle: str, ytitle: str, **kw: Any) -> go.Figure:
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


def log_if_wide(fig: go.Figure, values: Iterable[float], unit: str) -> go.Figure:
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


def chart_div(fig: go.Figure, div_id: str) -> str:
    body = pio.to_html(
        fig, full_html=False, include_plotlyjs=False, div_id=div_id, config=PLOT_CONFIG, default_height=CHART_HEIGHT
    )
    return f'<div class="chart">{body}</div>'


def error_bars(med: float, lo: float, hi: float, scale: float) -> tuple[float | None, float | None]:
    if not (math.isfinite(lo) and math.isfinite(hi) and math.isfinite(med)):
        return None, None
    return (hi - med) / scale, (med - lo) / scale


NUM_CELL = ' class="num"'


def fmt_ms(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "–"
    ms = seconds * 1e3
    return f"{ms:,.0f} ms" if abs(ms) >= 100 else f"{ms:.3g} ms"


def h3(pid: str, slug: str, text: str) -> str:
    return f'<h3 id="{pid}-sec-{slug}">{esc(text)}</h3>'
