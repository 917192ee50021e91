"""The cores axis end to end, with real socat, iperf3 and cpusets (docs/scaling.md): socat and direct at 1
and 2 cores per side, 1 flow, 2 repetitions of 2 s. Each trial is placed as its cores value says and
records it; the surface is printed; the known answers hold: socat runs one relay thread, on the client side
only, so at 1 core that side's busiest thread is socat at more than half a core and its CPU is busier than
the server side's (docs/benchmarks/scaling.md: 83-94% and 87-100% against 17-57%); direct runs no tunnel
thread. Whether a second core helps socat is left to the benchmark: 2 repetitions on a shared CI host
cannot tell +12% from nothing."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from tests.integration.helpers import run_json
from tunbench.host.cgroup import cpuset_refusal, online_cpus
from tunbench.monitor.stage import BUSIEST_THREAD, CPUS_BUSY, CPUS_GIVEN


def test_socat_and_direct_over_one_and_two_cores(tmp_path: Path) -> None:
    if cpuset_refusal():
        pytest.skip(f"this host cannot place roles on CPUs: {cpuset_refusal()}")
    cpus = online_cpus()
    if len(cpus) < 2:
        pytest.skip("the cores axis at 2 needs 2 CPUs")
    args = ["-t", "socat", "--cores", "1,2", "--flows", "1", "--direction", "up"]
    res, doc = run_json(tmp_path, *args, "--duration", "2", "--omit", "1", "--repeat", "2", timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    text = " ".join(res.stdout.split())
    assert "cores surface · socat" in text and "cores surface · direct" in text, res.stdout
    trials = doc["trials"]
    assert sorted({(t["label"], t["cores"]) for t in trials}) == [
        ("direct", 1),
        ("direct", 2),
        ("socat", 1),
        ("socat", 2),
    ]
    first, last = str(cpus[0]), str(cpus[-1])
    both = ",".join(map(str, cpus[:2])) if len(cpus) == 2 else None
    for t in trials:
        placed, m = t["params"]["cpuset"], t["metrics"]
        if t["cores"] == 1:
            assert (placed["client"], placed["server"]) == (first, last), placed
        elif both is not None:
            assert placed["client"] == placed["server"] == both, placed
        assert set(t["params"]["stage"]) == {"client", "server"}, t["params"]
        for role in ("client", "server"):
            assert m[CPUS_GIVEN.key(role=role)] == t["cores"]
    socat_1 = [t for t in trials if t["label"] == "socat" and t["cores"] == 1]
    for t in socat_1:  # one relay thread, on the client side's one CPU with iperf3's client
        top = t["params"]["threads"]["client"][0]
        assert top[0] == "socat" and t["metrics"][BUSIEST_THREAD.key(role="client")] >= 50.0, t["params"]["threads"]
        assert t["params"]["threads"]["server"] == []  # socat relays on the client side only
    busy = {
        role: statistics.median(t["metrics"][CPUS_BUSY.key(role=role)] for t in socat_1)
        for role in ("client", "server")
    }
    assert busy["client"] > busy["server"], busy
    for t in (t for t in trials if t["label"] == "direct"):  # no tunnel process, no thread to name
        assert t["params"]["threads"] == {"client": [], "server": []}
        assert not any(s.startswith("thread") for s in t["params"]["stage"].values())
