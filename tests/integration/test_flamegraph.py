"""`tunbench run --flamegraph`: perf + inferno on wireguard-go under load give SVGs with its function names."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.integration.helpers import run_json
from tunbench.perf.flamegraph import find_tool
from tunbench.store.db import Store

pytestmark = pytest.mark.skipif(
    shutil.which("perf") is None or find_tool("inferno-flamegraph") is None,
    reason="needs perf (linux-perf) and inferno (make tools)",
)
GO_NAMES = ("RoutineEncryption", "RoutineDecryption", "chacha20poly1305", "device.(*Peer)")


def test_flamegraph_of_wireguard_go_under_load(tmp_path: Path) -> None:
    out = tmp_path / "fg"
    res, doc = run_json(
        tmp_path,
        "-t",
        "wireguard-go",
        "--no-direct",
        "--duration",
        "2",
        "--omit",
        "0",
        "--repeat",
        "1",
        "--direction",
        "up",
        "--flamegraph",
        "--flamegraph-dir",
        str(out),
    )
    assert res.returncode == 0, res.stdout + res.stderr
    (t,) = doc["trials"]
    assert t["status"] == "ok", t["error"]
    uid = doc["run"]["uid"].split("-")[0]  # the run's prefix names its files (the uid is longer)
    files = sorted(p.name for p in out.iterdir())
    assert files == [f"{uid}-t001-wireguard-go-client.svg", f"{uid}-t001-wireguard-go-server.svg"]
    for role in ("client", "server"):
        svg = (out / f"{uid}-t001-wireguard-go-{role}.svg").read_text()
        assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
        found = [n for n in GO_NAMES if n in svg]
        assert found, f"no wireguard-go function names in the {role} flamegraph"
        assert "entry_SYSCALL_64" in svg or "do_syscall_64" in svg  # kernel frames too
        assert t["metrics"][f"flamegraph.{role}.sampled_cpu_s"] > 0.05
    with Store(tmp_path / "r.db") as store:
        (rec,) = store.find_run(uid).trials
        assert rec.id is not None
        stored = store.artifact(rec.id, "flamegraph.client.svg")
    assert stored is not None and b"</svg>" in stored


def test_flamegraph_is_not_the_profile_option() -> None:
    from tests.integration.helpers import tunbench

    res = tunbench("run", "--help")
    assert "--flamegraph" in res.stdout and "--profile" in res.stdout
