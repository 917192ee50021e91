"""The JSON format (docs/json-format.md), both ways: `render` writes a run (`--format json`, `tunbench export`,
`run --json`), `run_from_export` reads one back (`compare FILE.json`, `db import`).

Format history (bump JSON_SCHEMA on any incompatible change and say what changed):
  1  (tunbench 0.1.0) run, trials, summary. Later in 1, added (readers ignore what they do not know):
     trials[].series, the per-second series; trials[] and summary[] `clients` and `variant`, the
     multi-client workloads' axes (before them, a `clients`/`storm` trial's `flows` held the client
     count and a storm's `direction` its variant; now those are 1 and "-"); trials[] and summary[]
     `cores`, the cores axis (0 off it; absent in older exports).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from tunbench import workloads
from tunbench.errors import ExportError
from tunbench.metrics import MetricSpec, core
from tunbench.monitor import cost, crosscheck, interference
from tunbench.monitor.hostload import STEAL
from tunbench.report.interference_line import figures as interference_figures
from tunbench.report.summary import CaseSummary, summarize_trials
from tunbench.results import RunRecord, TrialRecord
from tunbench.workloads.iperf3 import CWND_MAX

JSON_SCHEMA = 1


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def _gap(x: float | None) -> float | None:
    """A series value or a stream's rate: null where it is a gap (NaN, or infinite: JSON has neither), as the
    store keeps it."""
    return None if x is None or not math.isfinite(x) else x


def _rate(x: Any) -> float:
    """A stream's rate read back: null (a gap) as NaN, as the store reads its NULL."""
    return math.nan if x is None else float(x)


ROLES = ("client", "server")
CPU_FIELDS = {
    "cpu": (cost.CPU_USER, cost.CPU_SYS),
    "cgroup_cpu": (cost.CGROUP_CPU_USER, cost.CGROUP_CPU_SYS),
    "sampled_cpu": (cost.SAMPLED_CPU_USER, cost.SAMPLED_CPU_SYS),
    "trial_cpu": (cost.TRIAL_CPU_USER, cost.TRIAL_CPU_SYS),
}
"""A trial's CPU objects in the export, by field: each side's user and system seconds (monitor/cost.py)."""


def _cpu(m: dict[str, float | None], user: MetricSpec, sys: MetricSpec) -> dict[str, dict[str, float | None]]:
    return {role: {"user_s": m.get(user.key(role=role)), "sys_s": m.get(sys.key(role=role))} for role in ROLES}


def trial_json(t: TrialRecord) -> dict[str, Any]:
    m = t.metrics
    return {
        "seq": t.seq,
        "tunnel": t.tunnel,
        "label": t.label,
        "profile": t.profile,
        "workload": t.workload,
        "flows": t.flows,
        "direction": t.direction,
        "clients": t.clients,
        "variant": t.variant,
        "cores": t.cores,
        "repetition": t.repetition,
        "status": t.status,
        "error": t.error or None,
        "started_at": t.started_at,
        core.THROUGHPUT.name: m.get(core.THROUGHPUT.name),
        "throughput_bps_up": m.get(core.THROUGHPUT_DIR.key(direction="up")),
        "throughput_bps_down": m.get(core.THROUGHPUT_DIR.key(direction="down")),
        "retransmits": m.get(core.RETRANSMITS.name),
        **{field: _cpu(m, user, sys) for field, (user, sys) in CPU_FIELDS.items()},
        "checks": {k: v for k, v in m.items() if any(c.matches(k) for c in crosscheck.FIGURES)},
        "interference": {
            "interfered": m.get(interference.INTERFERED.name),
            "reason": t.params.get("interference"),
            "foreign_cpu_pct": m.get(interference.FOREIGN_CPU.name),
            "other_runs": (t.params.get("interference_detail") or {}).get("runs"),
            "harness_cpu_pct": m.get(interference.HARNESS_CPU.name),
            "steal_pct": m.get(STEAL.name),
        },
        "rss_peak_bytes": {role: m.get(cost.RSS_PEAK.key(role=role)) for role in ROLES},
        "duration_s": t.window_s,  # the measured window, under the field name older exports have
        core.SETUP_S.name: m.get(core.SETUP_S.name),
        CWND_MAX.name: m.get(CWND_MAX.name),
        "streams": [
            {"stream": s[0], "direction": s[1], "received_bps": _gap(s[2]), "retransmits": s[3]} for s in t.streams
        ],
        "metrics": m,
        "series": {name: [[ts, _gap(v)] for ts, v in pts] for name, pts in sorted(t.series.items())},
        "params": t.params,
    }


def summary_json(s: CaseSummary) -> dict[str, Any]:
    t = s.throughput
    r = s.ratio_to_direct
    return {
        "tunnel": s.tunnel,
        "label": s.case.label,
        "profile": s.case.profile,
        "workload": s.case.workload,
        "flows": s.case.flows,
        "direction": s.case.direction,
        "clients": s.case.clients,
        "variant": s.case.variant,
        "cores": s.case.cores,
        "n": s.n,
        "n_units": s.throughput.n,  # independent units (warm bring-ups count once): what the CI counts
        "n_failed": s.n_failed,
        core.THROUGHPUT.name: {
            "median": _num(t.median),
            "min": _num(t.min),
            "max": _num(t.max),
            "ci_low": _num(t.ci_low),
            "ci_high": _num(t.ci_high),
            "cv": _num(t.cv),
            "ci_coverage": _num(t.ci_coverage),
        },
        "ratio_to_direct": None
        if r is None
        else {"value": _num(r.value), "ci_low": _num(r.ci_low), "ci_high": _num(r.ci_high)},
        "bits_per_cpu_second": {role: f.bits_per_cpu_s for role, f in s.roles.items()},
        "cpu_pct": {role: f.cpu_pct for role, f in s.roles.items()},
        "rss_peak_bytes": {role: f.rss_peak_bytes for role, f in s.roles.items()},
        "retransmits": s.retransmits,
        core.SETUP_S.name: s.setup_s,
        "warnings": [{"code": w.code, "message": w.message, "fix": w.fix} for w in s.warnings],
    }


def run_json(run: RunRecord) -> dict[str, Any]:
    return {
        "id": run.id,
        "uid": run.uid,
        "name": run.name,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "status": run.status,
        "tunbench_version": run.tunbench_version,
        "provenance": run.provenance,
        "scenario": run.scenario,
        "scenario_text": run.scenario_text,
        "scenario_hash": run.scenario_hash,
    }


def export(run: RunRecord) -> dict[str, Any]:
    return {
        "schema": JSON_SCHEMA,
        "run": run_json(run),
        "trials": [trial_json(t) for t in run.trials],
        "summary": [summary_json(s) for s in summarize_trials(run.trials)],
        "interference": interference_figures(run.trials),
    }


def render(run: RunRecord) -> str:
    return json.dumps(export(run), indent=2, allow_nan=False, default=str) + "\n"


# ---- import ---------------------------------------------------------------------------------------


def run_from_export(data: dict[str, Any], source: str = "JSON") -> RunRecord:
    """Rebuild a RunRecord (with its trials and their per-second series) from ``export``."""
    if not isinstance(data, dict) or data.get("schema") != JSON_SCHEMA:
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ExportError(f"{source}: not a tunbench JSON export of schema {JSON_SCHEMA} (schema: {got!r})")
    try:
        r = data["run"]
        run = RunRecord(
            id=int(r["id"]),
            uid=str(r["uid"]),
            name=str(r.get("name") or ""),
            started_at=str(r.get("started_at") or ""),
            finished_at=r.get("finished_at"),
            status=str(r.get("status") or ""),
            tunbench_version=str(r.get("tunbench_version") or ""),
            provenance=dict(r.get("provenance") or {}),
            scenario_text=str(r.get("scenario_text") or ""),
            scenario_hash=str(r.get("scenario_hash") or ""),
            scenario=dict(r.get("scenario") or {}),
        )
        run.trials = [_trial_from_export(t) for t in data["trials"]]
    except (KeyError, TypeError, ValueError) as e:
        raise ExportError(f"{source}: malformed tunbench JSON export ({type(e).__name__}: {e})") from e
    return run


def _axes_from_export(t: dict[str, Any]) -> tuple[int, str, int, str]:
    """(flows, direction, clients, variant). An export from before the `clients`/`variant` fields held a
    multi-client trial's client count in `flows` (a workload with a "clients" axis) and, where it has a
    "variant" axis (a storm), its variant in `direction` (as the store's schema 1 did: store/migrations.py
    moves them the same way)."""
    flows, direction = int(t["flows"]), str(t["direction"])
    if "clients" in t:
        return flows, direction, int(t["clients"]), str(t.get("variant") or "")
    axes = w.axes if (w := workloads.REGISTRY.get(str(t["workload"]))) is not None else ()
    if "variant" in axes:
        return 1, "-", flows, direction
    if "clients" in axes:
        return 1, direction, flows, ""
    return flows, direction, 1, ""


def _trial_from_export(t: dict[str, Any]) -> TrialRecord:
    flows, direction, clients, variant = _axes_from_export(t)
    return TrialRecord(
        seq=int(t["seq"]),
        tunnel=str(t["tunnel"]),
        label=str(t["label"]),
        profile=str(t["profile"]),
        workload=str(t["workload"]),
        flows=flows,
        direction=direction,
        clients=clients,
        variant=variant,
        cores=int(t.get("cores") or 0),
        repetition=int(t["repetition"]),
        params=dict(t.get("params") or {}),
        status=str(t.get("status") or "ok"),
        error=str(t.get("error") or ""),
        started_at=str(t.get("started_at") or ""),
        window_s=t.get("duration_s"),
        metrics=_metrics_from_export(t.get("metrics") or {}, int(t["seq"])),
        series={
            str(k): [(float(a), math.nan if b is None else float(b)) for a, b in pts]  # null: a gap
            for k, pts in (t.get("series") or {}).items()
        },
        streams=[
            (int(s["stream"]), str(s["direction"]), _rate(s.get("received_bps")), s.get("retransmits"))
            for s in t.get("streams") or []
        ],
    )


def _metrics_from_export(raw: Any, seq: int) -> dict[str, float | None]:
    """A trial's metrics, each a number or null (JSON has no NaN: null is a missing value). Anything else, a
    string such as "4.1e9" or a list, is a malformed export: ValueError names the trial and the key, so compare
    says what is wrong instead of failing later on a value it cannot judge."""
    if not isinstance(raw, dict):
        raise ValueError(f"trial {seq}: metrics must be an object, got {type(raw).__name__}")
    out: dict[str, float | None] = {}
    for key, value in raw.items():
        if value is None:
            out[str(key)] = None
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[str(key)] = float(value)
        else:
            raise ValueError(f"trial {seq}: metric {key!r} must be a number or null, got {value!r}")
    return out


class JsonExporter:
    """`--format json`, `-o FILE.json`, `tunbench export` and `run --json`: one run in tunbench's own format."""

    name = "json"
    suffixes = (".json",)

    def render(self, runs: Sequence[RunRecord]) -> str:
        if len(runs) != 1:
            raise ExportError("--format json exports one run at a time (the format holds one run)")
        return render(runs[0])
