"""`tunbench run --count-work` on real tunnels, against answers known in advance (issue 30):
socat relays with read()/write() of at most its -b bytes, so `buffer=2048` makes about 4x the reads and
writes per MB of `buffer=8192` (socat's relay loop: one read, one write per buffer)."""

from __future__ import annotations

import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import run_json
from tunbench.monitor.work import probe

pytestmark = pytest.mark.skipif(
    shutil.which("perf") is None or not probe(shutil.which("perf")).available,
    reason="needs perf allowed to count syscalls (tunbench doctor: counted work)",
)


def _by_label(doc: dict[str, Any], label: str, metric: str) -> list[float]:
    return [t["metrics"][metric] for t in doc["trials"] if t["label"] == label and t["status"] == "ok"]


def test_socat_small_buffer_makes_about_4x_the_reads_and_writes_per_mb(tmp_path: Path) -> None:
    res, doc = run_json(
        tmp_path,
        "-t", "socat[buffer=8192,label=big]", "-t", "socat[buffer=2048,label=small]",
        "--no-direct", "--duration", "2", "--omit", "0", "--repeat", "1", "--direction", "up", "--count-work",
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    for name in ("read_per_mb", "write_per_mb"):
        big = statistics.median(_by_label(doc, "big", f"work.client.{name}"))
        small = statistics.median(_by_label(doc, "small", f"work.client.{name}"))
        assert 3.0 < small / big < 5.0, f"{name}: {small:.0f} vs {big:.0f} per MB"
    for t in doc["trials"]:
        m = t["metrics"]
        assert m["work.client.syscalls"] >= m["work.client.syscalls.read"] + m["work.client.syscalls.write"]
        assert m["work.client.ctx_switches"] > 0
        assert m["work.client.exited"] == 0
        # socat has no server-side process: that side says so instead of counting zero
        assert "work.server.syscalls" not in m
        assert t["params"]["work"]["server"].startswith("not counted: no tunnel process")
