"""CSV export: one row per trial (every run given), fixed columns first, then every other metric by name.

Units are in the column names (``_bps``, ``_s``, ``_bytes``, ``_pct``). Empty cell = not measured. Pure.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from typing import Any

from tunbench.metrics import core
from tunbench.report.common import trial_jain
from tunbench.report.summary import ROLES, per_trial_role
from tunbench.results import RunRecord, TrialRecord

TRIAL_COLUMNS = (
    "run_id",
    "run_uid",
    "run_name",
    "seq",
    "tunnel",
    "label",
    "profile",
    "workload",
    "flows",
    "direction",
    "clients",
    "variant",
    "cores",
    "repetition",
    "status",
    "error",
    "started_at",
    "duration_s",  # TrialRecord.window_s, under the column name older exports have
)
METRIC_COLUMNS = (
    core.THROUGHPUT.name,
    *(core.THROUGHPUT_DIR.key(direction=d) for d in ("up", "down")),
    core.RETRANSMITS.name,
    core.WINDOW_S.name,
    core.SETUP_S.name,
)
"""The metrics every row has a column for, under their names (the others follow, sorted)."""
_ROLE_KEYS = ("cpu_user_s", "cpu_sys_s", "cpu_pct", "bits_per_cpu_s")
DERIVED_COLUMNS = (*(f"{role}.{key}" for role in ROLES for key in _ROLE_KEYS), "jain_index")


def _cell(x: Any) -> Any:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return ""
    return x


def _row(run: RunRecord, t: TrialRecord, extra: list[str]) -> list[Any]:
    base = [run.id, run.uid, run.name, t.seq, t.tunnel, t.label, t.profile, t.workload, t.flows, t.direction]
    base += [t.clients, t.variant, t.cores, t.repetition, t.status, (t.error or "").strip(), t.started_at, t.window_s]
    metrics = [t.metrics.get(k) for k in METRIC_COLUMNS]
    derived: list[float | None] = []
    for role in ROLES:
        r = per_trial_role(t, role)
        derived += [r["user_s"], r["sys_s"], r["cpu_pct"], r["bits_per_cpu_s"]]
    derived.append(trial_jain(t))
    return [_cell(x) for x in (*base, *metrics, *derived, *(t.metrics.get(k) for k in extra))]


def render(runs: list[RunRecord]) -> str:
    known = set(METRIC_COLUMNS)
    extra = sorted({k for r in runs for t in r.trials for k in t.metrics} - known)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*TRIAL_COLUMNS, *METRIC_COLUMNS, *DERIVED_COLUMNS, *extra])
    for run in runs:
        for t in sorted(run.trials, key=lambda t: t.seq):
            w.writerow(_row(run, t, extra))
    return buf.getvalue()


class CsvExporter:
    """`--format csv`, `-o FILE.csv`: one row per trial of every run given."""

    name = "csv"
    suffixes = (".csv",)

    def render(self, runs: Sequence[RunRecord]) -> str:
        return render(list(runs))
