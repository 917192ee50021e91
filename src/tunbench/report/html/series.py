"""Charts over time: every trial's per-second throughput, and the emulated bottleneck queues' occupancy, with
the link's scheduled events (outages, changes) marked; a heading and one chart per case group.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tunbench.link.emulator import QUEUE_SERIES
from tunbench.metrics import core, link
from tunbench.report.html.base import DIRECT_COLOR, chart_div, esc, group_title, h3, layout, rate_unit
from tunbench.results import TrialRecord
from tunbench.units import parse_duration_s


def link_events(t: TrialRecord) -> list[tuple[float, float, str]]:
    """The profile's events on a trial's series time axis (seconds since the measurement's start, which came
    `series_t0_s` after the workload's start, when the events started; a trial stored without it: --omit
    after), as (from, to, what); a change or a rebind lasts no time."""
    events = (t.params.get("profile") or {}).get("events") or []
    origin = t.metrics.get(core.SERIES_T0_S.name)
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
    return out + fault_marks(t)


def fault_marks(t: TrialRecord) -> list[tuple[float, float, str]]:
    """The faults that fired in a trial (`params["faults_fired"]`, each at its time on the series axis;
    before 0: in the bring-up), as (at, at, 'drop wg.initiation #1 (up)')."""
    out: list[tuple[float, float, str]] = []
    for f in t.params.get("faults_fired") or []:
        at = f.get("t_s")
        if isinstance(at, int | float):
            what = f"{f.get('action', 'fault')} {f.get('class', '?')} #{f.get('ordinal', '?')} ({f.get('direction')})"
            out.append((float(at), float(at), what))
    return out


def _mark_events(fig: go.Figure, trials: list[TrialRecord]) -> None:
    """Shade each outage and draw a line at each other event of the trials' profiles and each fault that
    fired, on every row."""
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
    series = [(t, name, pts) for t in trials for name, pts in sorted(t.series.items()) if pts and is_throughput(name)]
    scale, unit = rate_unit(v for _, _, pts in series for _, v in pts)
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
            hovertemplate=f"{esc(t.label)} rep {t.repetition} ({d})<br>t=%{{x:.1f}} s: %{{y:.3g}} {unit}"
            "<extra></extra>",
            row=labels.index(t.label) + 1,
            col=1,
        )
    _mark_events(fig, trials)
    fig = layout(
        fig,
        f"Per-second throughput — {group}<br><sub>one line per repetition: look for warm-up and stalls"
        f"{'; grey: the link’s events and faults' if any(link_events(t) for t in trials) else ''}</sub>",
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


def is_throughput(series_name: str) -> bool:
    return series_name.startswith(f"{core.THROUGHPUT.name}.")  # the per-direction series share its name


def is_queue(series_name: str) -> bool:
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
            short = bool(t.metrics.get(link.QUEUE_TRUNCATED.key(direction=d)))
            cut |= short
            fig.add_scatter(
                x=[p[0] for p in pts],
                y=[p[1] / scale for p in pts],
                mode="lines",
                line={"color": colors.get(t.label, DIRECT_COLOR), "width": 1.5, "shape": "vh"},
                name=t.label,
                legendgroup=t.label,
                showlegend=t.label not in shown,
                hovertemplate=f"{esc(t.label)} rep {t.repetition} ({d})<br>t=%{{x:.1f}} s: %{{y:.3g}} {unit}"
                + (" (the emulator's record ends early)" if short else "")
                + "<extra></extra>",
                row=row,
                col=1,
            )
            shown.add(t.label)
    _mark_events(fig, trials)
    interval = f"{min(steps) * 1e3:.0f} ms " if steps else ""
    notes = [
        f"the most bytes waiting in the emulator's bottleneck queue in each {interval}interval",
        "one line per repetition",
    ]
    if cut:
        notes.append("some records end before the measured window does")
    if any(link_events(t) for t in trials):
        notes.append("grey: the link’s events and faults")
    fig = layout(
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


def series_section(
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
            groups[group_title(t.case)].append(t)
    if not groups:
        return []
    charts = [
        chart_div(figure(ts, colors, group), f"{pid}-{slug}-{i}")
        for i, (group, ts) in enumerate(sorted(groups.items()))
    ]
    return [h3(pid, slug, heading), f'<div class="grid2">{"".join(charts)}</div>' if len(charts) > 1 else charts[0]]
