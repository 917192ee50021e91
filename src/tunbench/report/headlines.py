"""The tables of the workloads that have their own (Workload.columns): each case's headline metrics, the
median over its good repetitions, and how many repetitions were good. One model, drawn by the terminal
table (report/terminal.py) and the HTML report (report/html/)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from tunbench import workloads
from tunbench.results import CaseKey, TrialRecord
from tunbench.units import fmt
from tunbench.workloads.base import Column
from tunbench.workloads.per_host import host_key

# a case's axes, in column order, with the value that means "not an axis of this workload", and the header
AXES: dict[str, tuple[object, str]] = {
    "direction": ("-", "dir"),
    "variant": ("", "variant"),
    "flows": (1, "flows"),
    "clients": (1, "clients"),
}


def own_table(kind: str) -> bool:
    """Whether the workload `kind` has a table of its own; a kind no longer registered (an old store) falls
    back to the throughput summary."""
    w = workloads.REGISTRY.get(kind)
    return w is not None and w.own_table


@dataclass
class Row:
    case: CaseKey
    ok: int
    failed: int
    cells: list[str]  # one per column, the median written in its unit; empty when no repetition was good
    # a fleet over several client hosts: per host, its own figures of the columns that have one (workloads/
    # per_host.py), "" where a column is not per host (the server's)
    hosts: list[tuple[str, list[str]]] = field(default_factory=list)


@dataclass
class HeadlineTable:
    kind: str
    caption: str
    axes: list[str]  # the case axes that vary among the rows (keys of AXES)
    columns: list[Column]
    rows: list[Row]


def median(trials: list[TrialRecord], key: str) -> float | None:
    vals = sorted(v for t in trials if (v := t.metrics.get(key)) is not None and not math.isnan(v))
    if not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def cell(trials: list[TrialRecord], column: Column) -> str:
    return " / ".join(fmt(median(trials, k), column.unit) for k in column.key.split("|"))


def client_hosts(trials: list[TrialRecord]) -> list[str]:
    """The client hosts the trials' fleets spread over (params.net.clients.hosts, in order), when several."""
    names: dict[str, None] = {}
    for t in trials:
        hosts = ((t.params.get("net") or {}).get("clients") or {}).get("hosts") or {}
        names.update(dict.fromkeys(hosts))
    return list(names) if len(names) > 1 else []


def host_rows(trials: list[TrialRecord], columns: list[Column]) -> list[tuple[str, list[str]]]:
    """The per-host rows of a case whose good repetitions ran over several client hosts: per host, each
    column's median over the host's own figures ("" for a column without one)."""
    names = client_hosts(trials)
    rows = []
    for name in names:
        cells = []
        for c in columns:
            keys = [host_key(k, name) for k in c.key.split("|")]
            have = [k for k in keys if k is not None and any(k in t.metrics for t in trials)]
            cells.append(" / ".join(fmt(median(trials, k), c.unit) for k in have) if len(have) == len(keys) else "")
        rows.append((name, cells))
    return rows


def headline_tables(trials: list[TrialRecord]) -> list[HeadlineTable]:
    """One table per workload in `trials` with a table of its own, in registry order."""
    groups: dict[CaseKey, list[TrialRecord]] = defaultdict(list)
    for t in trials:
        if own_table(t.workload):
            groups[t.case].append(t)
    tables = []
    for kind, workload in workloads.REGISTRY.items():
        keys = sorted(
            (k for k in groups if k.workload == kind),
            key=lambda k: (k.profile, k.direction, k.variant, k.flows, k.clients, k.label != "direct", k.label),
        )
        if not keys:
            continue
        cols = workload.table_columns([t for k in keys for t in groups[k] if t.status == "ok"])
        rows = []
        for k in keys:
            ok = [t for t in groups[k] if t.status == "ok"]
            cells = [cell(ok, c) for c in cols] if ok else []
            rows.append(Row(k, len(ok), len(groups[k]) - len(ok), cells, host_rows(ok, cols)))
        axes = [a for a, (neutral, _) in AXES.items() if any(getattr(k, a) != neutral for k in keys)]
        tables.append(HeadlineTable(kind, workload.caption, axes, cols, rows))
    return tables
