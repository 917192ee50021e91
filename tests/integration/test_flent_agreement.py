"""Flent's RRUL itself against tunbench's rrul (`start = "flent"`) on the same emulated link, alternated, five
rounds each, for each netperf Flent can drive: the loaded RTT's median and p99 and each direction's goodput agree
within 10% (scripts/flent_vs_rrul.py does the measuring; the link is 20 Mbit/s, 10 ms each way, a 256 KB queue,
bbr on both sides, 4 + 4 flows, 30 s of load).

On demand only (marked `on_demand`, which `make test` and `make integration` deselect, so CI, where a skip is a
failure, does not collect it): `TUNBENCH_FLENT_AGREEMENT=1 pytest -m on_demand tests/integration/
test_flent_agreement.py`. Each netperf takes about 8 minutes, which CI's time budget cannot hold; the runs
recorded in docs/benchmarks/latency.md are this test's measurements. Flent comes from PyPI in a
venv of its own (`make flent`, TUNBENCH_FLENT names it), Debian's netperf from its non-free component (`make
netperf`), netperf's head from its source where it can be had (`make netperf-head NETPERF_SRC=DIR`, then
TUNBENCH_NETPERF_HEAD=build/netperf-head/bin). Each part is skipped, with the reason, where its pieces are
missing. Run it without holding /tmp/tunbench-measure.lock: the script takes it for each round's pair."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FLENT = os.environ.get("TUNBENCH_FLENT") or str(ROOT / "build" / "flent-venv" / "bin" / "flent")
HEAD = os.environ.get("TUNBENCH_NETPERF_HEAD", "")
BOUND = 0.10
FIGURES = ("p50_ms", "p99_ms", "up_mbit", "down_mbit")

pytestmark = [
    pytest.mark.on_demand,
    pytest.mark.skipif(
        not os.environ.get("TUNBENCH_FLENT_AGREEMENT"),
        reason="on demand: TUNBENCH_FLENT_AGREEMENT=1 (about 8 min per netperf, beyond CI's time budget)",
    ),
]


@pytest.mark.parametrize("netperf", ["debian", "head"])
def test_rrul_agrees_with_flents_rrul_within_10_percent(tmp_path: Path, netperf: str) -> None:
    if not Path(FLENT).exists():
        pytest.skip("Flent is not installed (make flent; TUNBENCH_FLENT names it)")
    extra: list[str] = []
    if netperf == "debian":
        if shutil.which("netperf") is None:
            pytest.skip("netperf is not installed (make netperf: Debian's non-free component)")
    elif not HEAD or not (Path(HEAD) / "netperf").exists():
        pytest.skip("netperf's head is not built (make netperf-head NETPERF_SRC=DIR; TUNBENCH_NETPERF_HEAD=its bin)")
    else:
        extra = ["--netperf-dir", HEAD]
    out = tmp_path / "rounds.json"
    argv = [
        sys.executable, str(ROOT / "scripts" / "flent_vs_rrul.py"), "--rounds", "5", "--length", "30",
        "--variant", 'start="flent"', "--flent", FLENT, "--lock-per", "pair", "--json", str(out),
        "--out", str(tmp_path / "data"), *extra,
    ]  # fmt: skip
    res = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rounds = json.loads(out.read_text())
    flent = [r for r in rounds if r["side"] == "flent"]
    rrul = [r for r in rounds if r["side"] == "rrul"]
    assert len(flent) == len(rrul) == 5, rounds
    for key in FIGURES:
        ratio = statistics.median(r[key] for r in rrul) / statistics.median(r[key] for r in flent)
        assert abs(ratio - 1.0) <= BOUND, f"{key}: rrul / Flent {ratio:.3f}\n{res.stdout[-3000:]}"
