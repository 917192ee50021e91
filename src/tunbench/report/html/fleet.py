"""The "Many clients" section: workloads whose trials carry a client count (scaling curves against it)
or per-client ready times (time-to-ready CDFs, a p50/p99/success table); kept out of the per-case charts.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go

from tunbench import workloads
from tunbench.report.common import (
    is_num,
    median_or_none,
)
from tunbench.report.html.base import DIRECT_COLOR, chart_div, esc, h3, label_colors, layout
from tunbench.results import CaseKey, TrialRecord
from tunbench.workloads import case_title
from tunbench.workloads.base import FleetWorkload, Scaling


def is_fleet(t: TrialRecord) -> bool:
    """A trial of N clients through one server (Workload.fleet): its per-client "streams" and ready times
    are not parallel flows of one test, so it has a section of its own."""
    return _fleet(t) is not None


_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def _fleet(t: TrialRecord) -> FleetWorkload[Any] | None:
    w = workloads.REGISTRY.get(t.workload)
    return w if isinstance(w, FleetWorkload) else None


def scaling_charts() -> list[Scaling]:
    """The scaling charts the fleet workloads declare (FleetWorkload.scaling), in registry order, each
    metric once (two workloads may record the same one)."""
    charts: dict[str, Scaling] = {}
    for w in workloads.REGISTRY.values():
        if isinstance(w, FleetWorkload):
            for c in w.scaling:
                charts.setdefault(c.metric, c)
    return list(charts.values())


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
    fig = layout(fig, f"{title}<br><sub>median over successful repetitions</sub>", "clients (N)", ytitle)
    fig.update_layout(margin_t=110)
    return fig


def _ready_cdf(t: TrialRecord) -> list[tuple[float, float]]:
    """A trial's time-to-ready CDF, from the series its workload declares (FleetWorkload.ready)."""
    if (w := _fleet(t)) is None or w.ready is None:
        return []
    pts = [(x, y) for x, y in t.series.get(w.ready.cdf) or [] if is_num(x) and is_num(y)]
    if pts:
        return sorted(pts)
    xs = sorted(v for _, v in t.series.get(w.ready.by_client) or [] if is_num(v))
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
    fig = layout(
        fig,
        "Connection storm: time until each client's tunnel is ready (CDF)"
        "<br><sub>from the start of the storm; first successful repetition of each case</sub>",
        "time to ready (s)",
        "fraction of clients ready ≤ x",
    )
    fig.update_layout(margin_t=110)
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%")
    return fig


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
        items.append(
            f"<li>{esc(case_title(case))}: {len(bad)} of {len(ts)} repetition(s) failed, e.g. {esc(errs)}</li>"
        )
    return f'<ul class="bad">{"".join(items)}</ul>' if items else ""


def many_clients_html(trials: list[TrialRecord], pid: str) -> str:
    multi = [t for t in trials if is_fleet(t)]
    if not multi:
        return ""
    colors = label_colors((t.label, t.tunnel) for t in multi)
    parts = [h3(pid, "many-clients", "Many clients"), multi_failures_html(multi)]
    scaling = scaling_charts()
    if any(c.metric in t.metrics for t in multi for c in scaling):
        charts = []
        for c in scaling:
            f = fig_clients_scaling(multi, colors, c.metric, c.scale, c.title, c.ytitle, c.fmt)
            if f is not None:
                charts.append(chart_div(f, f"{pid}-clients-{c.slug}"))
        if charts:
            parts.append('<p class="note">Scaling with the number of concurrent clients (x: N clients).</p>')
            parts.append(f'<div class="grid2">{"".join(charts)}</div>')
        else:
            parts.append('<p class="note">No successful multi-client trial to plot.</p>')
    cdf = fig_storm_cdf(multi, colors)
    if cdf is not None:
        parts.append(chart_div(cdf, f"{pid}-storm-cdf"))
    return "\n".join(p for p in parts if p)
