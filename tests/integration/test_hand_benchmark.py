"""scripts/hand_vs_tunbench.py (scripts/cross_check.py's throughput check through wireguard-go) runs: both
the hand-made pair and tunbench measured, nothing left behind. How closely they agree is a benchmark figure
(docs/benchmarks/interference.md), not asserted here."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.helpers import leftovers

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "hand_vs_tunbench.py"


def test_the_hand_benchmark_measures_both_and_leaves_nothing(tmp_path: Path) -> None:
    if subprocess.run(["which", "wireguard-go"], capture_output=True).returncode != 0:
        pytest.skip("wireguard-go is not installed (make deps)")
    out = tmp_path / "hand.json"
    res = subprocess.run(
        [sys.executable, str(SCRIPT), "--rounds", "1", "--duration", "1", "--omit", "0", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(out.read_text())
    assert list(doc) == ["wireguard-go/throughput"]
    check = doc["wireguard-go/throughput"]
    assert len(check["hand"]) == 1 and check["hand"][0] > 0
    assert len(check["tunbench"]) == 1 and check["tunbench"][0] > 0
    assert "tunbench/hand" in res.stdout
    # hand_pair.py names its namespaces and interfaces `tbh` + 5 digits; the SSH test hosts' `tbh-<hex>-...`
    # are not its own (another test, or another run on the machine, may hold some)
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not re.search(r"^tbh\d{5}", namespaces, re.M), namespaces
    wg = Path("/var/run/wireguard")
    sockets = [p for p in wg.glob("tbh*") if re.match(r"tbh\d{5}", p.name)] if wg.is_dir() else []
    assert not sockets
    assert not leftovers()
