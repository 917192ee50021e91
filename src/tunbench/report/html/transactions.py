"""The request/response workloads' chart (rr, udp-rr, crr: workloads/interactive.py): each case's transaction
time at its minimum, p50, p90, p99, p99.9 (where the case has one: generator = "sockperf") and maximum, one
line per tunnel, on a log axis (a tunnel on `lan` and the same tunnel across 100 ms of RTT are four decades
apart)."""

from __future__ import annotations

import statistics
from collections import defaultdict

import plotly.graph_objects as go

from tunbench.report.common import is_num
from tunbench.report.html.base import DIRECT_COLOR, esc, group_title, layout
from tunbench.results import CaseKey, TrialRecord
from tunbench.workloads.interactive import LATENCY, LATENCY_P99, LATENCY_P999

POINTS = (
    ("min", LATENCY.key(stat="min")),
    ("p50", LATENCY.key(stat="p50")),
    ("p90", LATENCY.key(stat="p90")),
    ("p99", LATENCY_P99.name),
    ("p99.9", LATENCY_P999.name),
    ("max", LATENCY.key(stat="max")),
)
"""The x axis: where on the distribution, and the metric that holds it."""


def transaction_times(trials: list[TrialRecord]) -> dict[CaseKey, dict[str, float]]:
    """Per case with a transaction-time p99, the median over its successful trials of each point (µs)."""
    values: dict[CaseKey, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for t in trials:
        if t.status != "ok" or not is_num(t.metrics.get(LATENCY_P99.name)):
            continue
        for name, key in POINTS:
            v = t.metrics.get(key)
            if v is not None and is_num(v):
                values[t.case][name].append(v)
    return {case: {name: statistics.median(xs) for name, xs in points.items() if xs} for case, points in values.items()}


def fig_transactions(trials: list[TrialRecord], colors: dict[str, str]) -> go.Figure | None:
    """The transaction time's distribution per case (medians over repetitions), on a log axis; None when no
    trial has one."""
    data = transaction_times(trials)
    if not data:
        return None
    tunnels = {t.case: t.tunnel for t in trials}
    fig = go.Figure()
    for case in sorted(data, key=lambda c: (group_title(c), c.label)):
        points = data[case]
        names = [name for name, _ in POINTS if name in points]
        direct = tunnels.get(case) == "direct"
        color = DIRECT_COLOR if direct else colors.get(case.label)
        fig.add_scatter(
            x=names,
            y=[points[n] for n in names],
            mode="lines+markers",
            name=f"{case.label} · {group_title(case)}",
            line={"color": color, "dash": "dot" if direct else "solid"},
            hovertemplate=f"{esc(case.label)} · {esc(group_title(case))}<br>%{{x}}: %{{y:,.0f}} µs<extra></extra>",
        )
    fig = layout(
        fig,
        "Transaction time (request/response, connection per transaction)"
        "<br><sub>medians over the successful repetitions; netperf's percentiles are estimates to 1-10% of their "
        "value; where p50 to p99 share one bucket, or one lies outside the minimum and maximum, they are not "
        "resolved and not drawn; p99.9 with sockperf only</sub>",
        "",
        "transaction time (µs, log)",
    )
    fig.update_yaxes(type="log", rangemode="normal")
    return fig
