"""The cores surface in the HTML report: per tunnel, a chart of throughput against cores (one line per
case, i.e. per flow count, each point labelled with what saturated) and the surface's table."""

from __future__ import annotations

import plotly.graph_objects as go

from tunbench.report.html.base import PALETTE, chart_div, esc, h3, layout
from tunbench.report.scaling import Curve, caption_lines, curves, gain_text, gbit, knee_text, stage_cell
from tunbench.results import TrialRecord


def fig_cores(label: str, mine: list[Curve]) -> go.Figure:
    """Throughput against cores for one tunnel: a solid line per case, the linear extrapolation of its
    first point dotted, each point labelled client / server saturated stage."""
    fig = go.Figure()
    for i, c in enumerate(mine):
        color = PALETTE[i % len(PALETTE)]
        xs = [p.cores for p in c.points]
        labels = [f"client: {p.side_text('client')}<br>server: {p.side_text('server')}" for p in c.points]
        fig.add_scatter(
            x=xs,
            y=[p.median_bps / 1e9 for p in c.points],
            mode="lines+markers+text",
            text=labels,
            # above the line for the first case, below for the next, so two close lines' labels do not overlap
            textposition=[
                f"{'top' if i % 2 == 0 else 'bottom'} {'right' if j == 0 else 'left'}" for j in range(len(xs))
            ],
            textfont={"size": 10},
            name=c.title,
            legendgroup=c.title,
            line={"color": color},
            customdata=[[stage_cell(p), p.n, p.efficiency or 0.0] for p in c.points],
            hovertemplate="%{x} cores: %{y:.3g} Gbit/s (median of %{customdata[1]}), ×linear %{customdata[2]:.2f}"
            "<br>%{customdata[0]}<extra>%{fullData.name}</extra>",
        )
        first = c.points[0]
        fig.add_scatter(
            x=xs,
            y=[first.median_bps / first.cores * n / 1e9 for n in xs],
            mode="lines",
            line={"color": color, "dash": "dot", "width": 1},
            name=f"{c.title}: linear",
            legendgroup=c.title,
            showlegend=False,
            hoverinfo="skip",
        )
    fig = layout(
        fig,
        f"{label}: throughput against cores per side<br><sup>dotted: linear from the first point; labels: what "
        "saturated each side, and its busiest tunnel thread</sup>",
        "cores per side",
        "Gbit/s (median)",
    )
    ticks = sorted({p.cores for c in mine for p in c.points})
    fig.update_xaxes(tickmode="array", tickvals=ticks, range=[ticks[0] - 0.15, ticks[-1] + 0.15])
    return fig


def _table(pid: str, label: str, mine: list[Curve]) -> str:
    rows = []
    for c in mine:
        for i, p in enumerate(c.points):
            eff = f"{p.efficiency:.2f}" if p.efficiency is not None else "–"
            rows.append(
                f'<tr><td>{esc(c.title) if i == 0 else ""}</td><td class="num">{p.cores}</td>'
                f'<td class="num">{gbit(p.median_bps)}</td><td class="num">{gbit(p.per_core_bps)}</td>'
                f'<td class="num">{eff}</td><td class="num">{p.n}</td>'
                f"<td>{esc(knee_text(c)) if i == 0 else ''}</td>"
                f"<td>{esc(f'{c.gain_span} {gain_text(c)}') if i == 1 else ''}</td>"
                f"<td>{esc(p.side_text('client'))}</td><td>{esc(p.side_text('server'))}</td></tr>"
            )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("case", "cores", "Gbit/s", "per core", "×linear", "n", "knee", "gain", "client", "server")
    )
    return (
        f'<div class="table-wrap"><table id="{esc(pid)}-cores-{esc(label)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def cores_html(trials: list[TrialRecord], pid: str) -> str:
    """The section ("" when no case ran at two or more cores values)."""
    by_label: dict[str, list[Curve]] = {}
    for c in curves(trials):
        by_label.setdefault(c.label, []).append(c)
    if not by_label:
        return ""
    parts = [h3(pid, "cores", "Scaling with cores")]
    parts += [f'<p class="meta">{esc(line)}</p>' for line in caption_lines()]
    for i, (label, mine) in enumerate(by_label.items()):
        parts.append(chart_div(fig_cores(label, mine), f"{pid}-cores-{i}"))
        parts.append(_table(pid, label, mine))
    return "\n".join(parts)
