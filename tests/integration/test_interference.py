"""Two real runs at once on this host: each says so for the trials they shared, and --redo-interfered
measures such a trial again with the reason kept (monitor/interference.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.helpers import RUN_LINE, STARTED, tunbench

STATE = Path("/run/tunbench")


def _ledgers() -> set[str]:
    return {p.stem for p in STATE.glob("tb*.json")} if STATE.is_dir() else set()


def test_two_runs_at_once_each_flag_the_trials_they_shared(tmp_path: Path) -> None:
    before = _ledgers()
    long_json, short_json = tmp_path / "long.json", tmp_path / "short.json"
    common = ("-t", "socat", "--direction", "up", "--duration", "2", "--omit", "0", "--no-direct")
    env = {**os.environ, "COLUMNS": "200"}
    first = subprocess.Popen(
        [sys.executable, "-m", "tunbench", "run", "--db", str(tmp_path / "a.db"), "--json", str(long_json),
         *common, "--repeat", "4"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (_ledgers() - before) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _ledgers() - before, "the first run never started"
        second = tunbench(
            "run", "--db", str(tmp_path / "b.db"), "--json", str(short_json), *common, "--repeat", "1",
            "--redo-interfered",
        )  # fmt: skip
        out, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.terminate()
            first.communicate(timeout=60)
    STARTED.update(RUN_LINE.findall(out))
    assert first.returncode == 0, out + err
    long_doc, short_doc = json.loads(long_json.read_text()), json.loads(short_json.read_text())
    # the runs' prefixes (their ledgers' names), as each printed them first
    (long_uid,), (short_uid,) = RUN_LINE.findall(out), RUN_LINE.findall(second.stdout)

    # the short run's trial ran beside the long run: interfered, measured again, the reason kept
    (trial,) = short_doc["trials"]
    retried = trial["params"].get("retried", [])
    assert retried and all(long_uid in why and "interfered" in why for why in retried), trial["params"]
    assert "interfered with" in second.stdout
    # the long run's trials that ran beside the short one name it; every trial recorded the figures
    flagged = [t for t in long_doc["trials"] if t["interference"]["interfered"] == 1.0]
    named = [t for t in flagged if short_uid in (t["interference"]["other_runs"] or [])]
    assert named, flagged
    # on a slow box the short run's start (its imports, before its ledger exists) or its end can fall in a
    # trial of the long run beside it: flagged then for that foreign CPU, with the reason, not for a run
    for t in flagged:
        if t not in named:
            assert "foreign CPU" in (t["interference"]["reason"] or ""), t["interference"]
    assert short_uid in out and "interfered" in out
    for t in long_doc["trials"] + short_doc["trials"]:
        assert t["interference"]["foreign_cpu_pct"] is not None
        assert t["interference"]["harness_cpu_pct"] is not None
    assert long_doc["interference"]["trials"] == 4
