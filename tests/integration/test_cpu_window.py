"""CPU over the measured window, with a known answer: a process in a real role cgroup burns a share of a
core before, during and after a window it reports itself, and the runner's figures must match its own
account of the CPU it used in that window (not the whole call's)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tunbench.host import ledger as state
from tunbench.host.cgroup import RoleCgroup, cgroup_root
from tunbench.monitor.sampler import Sampler
from tunbench.results import TrialRecord
from tunbench.trial.pair import cost_metrics_over

# 1 s at half a core, 2 s at a full core (the window), 1 s at half a core; the burner reports the window's
# edges on the monotonic clock and its own CPU time at each edge (time.process_time: what it really got,
# whatever else the host runs)
BURNER = r"""
import json, time
def burn(seconds, duty):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.monotonic()
        while time.monotonic() - t < 0.01 * duty:
            pass
        time.sleep(0.01 * (1 - duty))
burn(1.0, 0.5)
t0, c0 = time.monotonic(), time.process_time()
burn(2.0, 1.0)
t1, c1 = time.monotonic(), time.process_time()
burn(1.0, 0.5)
print(json.dumps({"t0": t0, "t1": t1, "cpu_window": c1 - c0, "cpu_all": time.process_time()}))
"""


def test_cpu_figures_cover_the_measured_window_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if cgroup_root() is None:
        pytest.fail("no cgroup hierarchy: the CPU accounting under test needs one")
    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")
    ledger = state.Ledger.open("tbcc0001")
    try:
        with RoleCgroup("tbcc0001-t1-server", ledger) as cg:
            assert cg.procs_file is not None
            procs = str(cg.procs_file)
            with Sampler({"server": (cg.pids, cg)}) as sampler:
                # the burner joins the cgroup before it runs a line of Python (as proc.Daemon does)
                out = subprocess.run(
                    ["sh", "-c", f'echo $$ > {procs} && exec {sys.executable} -c "$0"', BURNER],
                    capture_output=True,
                    text=True,
                    timeout=30,
                    check=True,
                ).stdout
                time.sleep(0.3)  # idle tail, as iperf3's result exchange
            truth = json.loads(out)
            rec = TrialRecord(
                seq=1,
                tunnel="t",
                label="t",
                profile="lan",
                workload="w",
                flows=1,
                direction="up",
                repetition=0,
                params={},
            )
            window = (truth["t0"] - sampler.t0, truth["t1"] - sampler.t0)
            cost_metrics_over(rec, sampler.results, sampler.wall_s, window)
    finally:
        ledger.close()
    m = rec.metrics
    cpu = m["cpu.server.user_s"] + m["cpu.server.sys_s"]
    whole = m["trial_cpu.server.user_s"] + m["trial_cpu.server.sys_s"]
    sampled = m["sampled_cpu.server.user_s"] + m["sampled_cpu.server.sys_s"]
    assert m["window_s"] == pytest.approx(truth["t1"] - truth["t0"], abs=1e-6)
    # the headline is the window's CPU (the burner's own account), not the whole call's
    assert cpu == pytest.approx(truth["cpu_window"], rel=0.05, abs=0.05), (cpu, truth)
    assert sampled == pytest.approx(truth["cpu_window"], rel=0.05, abs=0.05), (sampled, truth)
    assert whole == pytest.approx(truth["cpu_all"], rel=0.05, abs=0.08), (whole, truth)
    assert whole > cpu + 0.5  # the half-core seconds around the window are outside it
    assert m["check.cpu.server.ok"] == 1.0
