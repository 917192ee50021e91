"""`tunbench doctor --noise`: the pure checks over what the machine says, noise_checks() over a fixture
/sys tree and a fixture ledger directory, and the command through typer's CliRunner."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from tunbench import doctor
from tunbench.cli import app
from tunbench.host import ledger as state


def test_load() -> None:
    assert doctor.load_check((0.1, 0.2, 0.3), 2).ok
    bad = doctor.load_check((3.83, 2.44, 1.91), 2)
    assert not bad.ok and bad.detail == "3.83 2.44 1.91 (1, 5, 15 min) on 2 CPU(s)" and "top" in bad.fix


def test_governor() -> None:
    assert doctor.governor_check({}).ok and "not exposed" in doctor.governor_check({}).detail
    assert doctor.governor_check({"cpu0": "performance\n", "cpu1": "performance\n"}).ok
    mixed = doctor.governor_check({"cpu0": "powersave\n", "cpu1": "performance\n", "cpu2": "powersave\n"})
    assert not mixed.ok and mixed.detail == "performance on 1 CPU(s), powersave on 2 CPU(s)"
    assert "cpupower frequency-set -g performance" in mixed.fix


@pytest.mark.parametrize(
    ("no_turbo", "boost", "ok", "detail"),
    [
        ("1\n", None, True, "intel_pstate turbo off"),
        ("0\n", "1\n", False, "intel_pstate turbo on"),  # intel_pstate wins when both exist
        (None, "0\n", True, "cpufreq boost off"),
        (None, "1\n", False, "cpufreq boost on"),
        (None, None, True, doctor.NOT_EXPOSED),
    ],
)
def test_turbo(no_turbo: str | None, boost: str | None, ok: bool, detail: str) -> None:
    c = doctor.turbo_check(no_turbo, boost)
    assert (c.ok, c.detail) == (ok, detail)


def test_smt_irqbalance_thp() -> None:
    assert not doctor.smt_check("1\n").ok and doctor.smt_check("0\n").ok and doctor.smt_check(None).ok
    assert not doctor.irqbalance_check(["systemd", "irqbalance"]).ok
    assert doctor.irqbalance_check(["systemd", "sshd"]).ok
    assert not doctor.thp_check("[always] madvise never\n").ok
    assert doctor.thp_check("always [madvise] never\n").detail == "madvise"
    assert doctor.thp_check("always madvise [never]\n").ok and doctor.thp_check(None).ok


def test_steal() -> None:
    quiet = doctor.steal_check({"steal_pct": 0.4, "busy_pct": 12.0}, 1.0)
    assert quiet.ok and quiet.detail == "0.4% stolen, 12% busy of all CPUs over 1 s"
    stolen = doctor.steal_check({"steal_pct": 5.0, "busy_pct": 50.0}, 1.0)
    assert not stolen.ok and "quieter host" in stolen.fix
    assert doctor.steal_check({}, 1.0).ok


def test_other_runs() -> None:
    assert doctor.runs_check([], 10).ok
    assert doctor.runs_check([("tb000001", 10, True)], 10).ok  # itself
    c = doctor.runs_check([("tb000001", 99, True), ("tb000002", 98, False)], 10)
    assert not c.ok and c.detail == "tb000001 (pid 99) running; 1 left by killed runs" and "wait" in c.fix
    dead = doctor.runs_check([("tb000002", 98, False)], 10)
    assert dead.ok and "tunbench clean" in dead.fix


def _fixture_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "root"
    cpu = root / "sys/devices/system/cpu"
    for n, gov in ((0, "powersave"), (1, "powersave")):
        (cpu / f"cpu{n}/cpufreq").mkdir(parents=True)
        (cpu / f"cpu{n}/cpufreq/scaling_governor").write_text(gov + "\n")
    (cpu / "intel_pstate").mkdir()
    (cpu / "intel_pstate/no_turbo").write_text("0\n")
    (cpu / "smt").mkdir()
    (cpu / "smt/active").write_text("1\n")
    (root / "sys/kernel/mm/transparent_hugepage").mkdir(parents=True)
    (root / "sys/kernel/mm/transparent_hugepage/enabled").write_text("[always] madvise never\n")
    states = tmp_path / "state"
    states.mkdir()
    me = psutil.Process()
    live = {"prefix": "tbaaaaaa", "owner_pid": me.ppid(), "owner_create_time": psutil.Process(me.ppid()).create_time()}
    dead = {"prefix": "tbbbbbbb", "owner_pid": 1, "owner_create_time": 0.0}
    for led in (live, dead):
        (states / f"{led['prefix']}.json").write_text(json.dumps(led))
    monkeypatch.setattr(state, "STATE_DIR", states)
    return root


def test_noise_checks_read_the_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _fixture_host(tmp_path, monkeypatch)
    got = {c.name: c for c in doctor.noise_checks(root, sample_s=0.05)}
    assert got["CPU frequency governor"].detail == "powersave on 2 CPU(s)"
    assert got["turbo / boost"].detail == "intel_pstate turbo on"
    assert not got["SMT (hyper-threading)"].ok
    assert got["transparent huge pages"].detail == "always"
    assert got["other tunbench runs"].detail == f"tbaaaaaa (pid {os.getppid()}) running; 1 left by killed runs"
    assert "stolen" in got["steal time"].detail or "no CPU time" in got["steal time"].detail
    assert {"load average", "irqbalance"} <= set(got)


def test_noise_checks_on_a_vm_say_not_exposed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "none")
    got = {c.name: c for c in doctor.noise_checks(tmp_path, sample_s=0.0)}
    for name in ("CPU frequency governor", "turbo / boost", "SMT (hyper-threading)"):
        assert got[name].ok and "not exposed" in got[name].detail
    assert got["other tunbench runs"].detail == "none running"


def test_doctor_noise_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _fixture_host(tmp_path, monkeypatch)
    monkeypatch.setattr(doctor, "checks", lambda family=None: [doctor.Check("root", True, "running as root")])
    monkeypatch.setattr(doctor, "noise_checks", functools.partial(doctor.noise_checks, root, sample_s=0.05))
    res = CliRunner().invoke(app, ["doctor", "--noise"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output  # noise is advice: the exit status stays the tool check's
    out = res.output
    assert "host noise" in out and "! SMT (hyper-threading): active" in out
    assert "fix: cpupower frequency-set -g performance" in out
    assert "tbaaaaaa" in out and "steal time" in out
    plain = CliRunner().invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert plain.exit_code == 0 and "host noise" not in plain.output
    helptext = " ".join(CliRunner().invoke(app, ["doctor", "--help"], env={"COLUMNS": "200"}).output.split())
    assert "--noise" in helptext and "exit status" in helptext
