"""A or B from the store or a JSON export file, and its name in the report. The only I/O of compare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tunbench.errors import TunbenchError
from tunbench.report.compare.result import CompareError
from tunbench.report.json_export import JSON_SCHEMA
from tunbench.results import RunRecord, TrialRecord


def run_from_export(data: dict[str, Any], source: str = "JSON") -> RunRecord:
    """Rebuild a RunRecord (with its trials and their per-second series) from ``json_export.export``."""
    if not isinstance(data, dict) or data.get("schema") != JSON_SCHEMA:
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise CompareError(f"{source}: not a tunbench JSON export of schema {JSON_SCHEMA} (schema: {got!r})")
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
        raise CompareError(f"{source}: malformed tunbench JSON export ({type(e).__name__}: {e})") from e
    return run


def _axes_from_export(t: dict[str, Any]) -> tuple[int, str, int, str]:
    """(flows, direction, clients, variant). An export from before the `clients`/`variant` fields held a
    multi-client trial's client count in `flows` and a storm's variant in `direction` (as the store's
    schema 1 did: store/migrations.py moves them the same way)."""
    flows, direction = int(t["flows"]), str(t["direction"])
    if "clients" in t:
        return flows, direction, int(t["clients"]), str(t.get("variant") or "")
    if t["workload"] == "storm":
        return 1, "-", flows, direction
    if t["workload"] == "clients":
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
        repetition=int(t["repetition"]),
        params=dict(t.get("params") or {}),
        status=str(t.get("status") or "ok"),
        error=str(t.get("error") or ""),
        started_at=str(t.get("started_at") or ""),
        duration_s=t.get("duration_s"),
        metrics=dict(t.get("metrics") or {}),
        series={str(k): [(float(a), float(b)) for a, b in pts] for k, pts in (t.get("series") or {}).items()},
        streams=[
            (int(s["stream"]), str(s["direction"]), float(s["received_bps"]), s.get("retransmits"))
            for s in t.get("streams") or []
        ],
    )


def load_run(ref: str, db: str | Path) -> RunRecord:
    """A run from a JSON export file (if ``ref`` is an existing file) or from the store at ``db``."""
    from tunbench.store.db import Store, store_exists

    path = Path(ref)
    if path.is_file():
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CompareError(f"cannot read {path} as a tunbench JSON export: {e}") from e
        return run_from_export(data, source=str(path))
    if not store_exists(db):
        raise CompareError(f"{ref!r} is not a file and there is no result store at {db} (pass --db PATH)")
    try:
        with Store(db) as store:
            return store.find_run(ref)
    except TunbenchError as e:
        raise CompareError(str(e)) from e


def run_name(run: RunRecord) -> str:
    name = f" {run.name}" if run.name else ""
    return f"run #{run.id} ({run.uid}{name})"
