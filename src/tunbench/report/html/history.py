"""`tunbench report --history`: the history of one machine as one self-contained HTML page (the run report's
template, plotly.js embedded once, works offline).

Per case, one chart per metric: the points' medians in order (runs, or commits when runs name them), the CI
of each median as a band, and each change point as a vertical line at the first point of the new level,
red for a regression, green for an improvement, labelled with the change and its CI. A table lists every
change point first.

Pure: a History in, text out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from importlib import resources
from string import Template

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from tunbench import __version__
from tunbench.report.history import History, Series
from tunbench.report.html.base import PLOTLY_FOOTER, chart_div, esc, layout
from tunbench.results import CaseKey
from tunbench.workloads import case_title

LINE = "#1f77b4"
BAND = "rgba(31, 119, 180, 0.18)"
WORSE = "#d62728"
BETTER = "#2ca02c"


def _fin(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _cov(coverage: float) -> str:
    return f"{coverage:.0%}" if math.isfinite(coverage) else "–"


def fig_series(s: Series) -> go.Figure:
    """The series: median per point, its CI as a band, change points as vertical lines."""
    scale = s.metric.scale
    x = list(range(1, len(s.points) + 1))
    ticks = [p.commit[:8] if p.commit else p.runs[0].uid for p in s.points]
    med = [p.summary.median * scale for p in s.points]
    lo = [_fin(p.summary.ci_low * scale) for p in s.points]
    hi = [_fin(p.summary.ci_high * scale) for p in s.points]
    fig = go.Figure()
    # the band: upper edge, then the lower edge filled up to it (points without a CI leave a gap)
    fig.add_scatter(x=x, y=hi, mode="lines", line={"width": 0}, showlegend=False, hoverinfo="skip", name="CI high")
    fig.add_scatter(
        x=x,
        y=lo,
        mode="lines",
        line={"width": 0},
        fill="tonexty",
        fillcolor=BAND,
        name="CI of the median",
        hoverinfo="skip",
    )
    fig.add_scatter(
        x=x,
        y=med,
        mode="lines+markers",
        line={"color": LINE},
        name="median",
        customdata=[
            [
                ", ".join(r.text for r in p.runs),
                p.time,
                p.commit or "–",
                p.summary.n,
                lo[i],
                hi[i],
                _cov(p.summary.ci_coverage),
            ]
            for i, p in enumerate(s.points)
        ],
        hovertemplate="%{customdata[0]}<br>%{customdata[1]}<br>commit %{customdata[2]}<br>median %{y:.4g} "
        + esc(s.metric.unit)
        + " [%{customdata[4]:.4g}, %{customdata[5]:.4g}] (CI coverage %{customdata[6]}), n=%{customdata[3]}"
        "<extra></extra>",
    )
    for i, c in enumerate(s.changes):
        color = WORSE if c.regression else BETTER
        word = c.kind.lower()
        fig.add_vline(
            x=c.point.index + 0.5,  # between the last point of the old level and the first of the new
            line={"color": color, "dash": "dash", "width": 2},
            annotation_text=f"{word} {esc(s.size_text(s.changes[i]))}",
            annotation_font_color=color,
            annotation_position="top left" if i % 2 else "top right",
        )
        b0, b1 = c.point.before
        a0, a1 = c.point.after
        for (start, stop), level in (((b0, b1), c.point.median_before), ((a0, a1), c.point.median_after)):
            fig.add_scatter(
                x=[start + 1, stop],
                y=[level * scale, level * scale],
                mode="lines",
                line={"color": color, "width": 1, "dash": "dot"},
                showlegend=False,
                hoverinfo="skip",
                name="segment median",
            )
    fig.update_xaxes(tickmode="array", tickvals=x, ticktext=ticks, tickangle=-45 if len(x) > 12 else 0)
    by = "commit" if s.by_commit else "run"
    unit = f" ({s.metric.unit})" if s.metric.unit else ""
    fig = layout(fig, esc(s.title), f"{by}, in the order measured", f"{s.metric.title}{unit}")
    # not from zero, unlike the run report's bars: a history is read for shifts of a few percent
    return fig.update_yaxes(rangemode="normal")


def changes_table(h: History) -> str:
    rows = []
    for s in h.series:
        for c in s.changes:
            cls = "bad" if c.regression else "ok"
            rows.append(
                f"<tr><td>{esc(case_title(s.case))}</td><td>{esc(s.metric.title)}</td>"
                f'<td class="{cls}">{c.kind.lower()}</td>'
                f"<td>{esc(s.change_text(c))}</td></tr>"
            )
    if not rows:
        return '<p class="ok">No change point in any series.</p>'
    head = "<tr><th>case</th><th>metric</th><th>kind</th><th>change</th></tr>"
    return f'<div class="table-wrap"><table><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></div>'


def render(h: History) -> str:
    template = Template(resources.files("tunbench.report").joinpath("templates/report.html").read_text("utf-8"))
    title = f"tunbench history: {h.machine.hostname or h.machine.id}"
    lead = (
        "Each case's metrics over the finished runs of one machine, in the order measured: the median of each "
        "point with a 95% confidence interval of the median as a band (with few trials per point, the widest "
        "interval they allow: its real coverage is in the hover, 75% at 3 trials). Dashed lines mark change points "
        f"(split over sliding spans of {h.span} points, t-test p < {h.max_pvalue:g}), red for a regression, green for "
        "an improvement, with the change of the median and its CI."
    )
    by_case: dict[CaseKey, list[Series]] = defaultdict(list)
    for s in h.series:
        by_case[s.case].append(s)
    parts = [f'<p class="meta">{esc(h.header())}</p>', '<h2 id="changes">Change points</h2>', changes_table(h)]
    if not h.series:
        parts.append("<p>No finished run measured any case on this machine.</p>")
    for ci, (case, series) in enumerate(by_case.items()):
        parts.append(f'<h2 id="case-{ci}">{esc(case_title(case))}</h2>')
        for si, s in enumerate(series):
            parts.append(chart_div(fig_series(s), f"h{ci}-{si}"))
    toc = ""
    if len(by_case) > 1:
        links = "".join(f'<li><a href="#case-{i}">{esc(case_title(c))}</a></li>' for i, c in enumerate(by_case))
        toc = f"<nav><b>Cases</b><ul>{links}</ul></nav>"
    return template.substitute(
        title=esc(title),
        lead=esc(lead),
        toc=toc,
        body="\n".join(parts),
        version=esc(__version__),
        plotlyjs=get_plotlyjs(),
        main_class="",
        footer=PLOTLY_FOOTER.replace("$version", esc(__version__)),
    )
