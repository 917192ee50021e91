"""tunbench's wheel (`make wheel`) installed into a fresh virtual environment outside the checkout: it
carries tunbench-link, so `doctor`, `link selftest --quick` and a run through an emulated link work there
with no Rust toolchain, no TUNBENCH_LINK, no checkout on any path and the environment not on PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.tags import sys_tags
from packaging.utils import parse_wheel_filename

from tests.integration.helpers import RUN_LINE, STARTED

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _wheel() -> Path:
    found = sorted((REPO / "dist").glob("tunbench-*.whl"), key=lambda p: p.stat().st_mtime)
    if not found:
        pytest.skip("no wheel in dist/: run `make wheel` (make test builds it first)")
    return found[-1]


def _env() -> dict[str, str]:
    """A user's shell: nothing of this checkout or of any virtual environment."""
    drop = {"PYTHONPATH", "TUNBENCH_LINK", "VIRTUAL_ENV", "PYTHONHOME"}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "PATH": SYSTEM_PATH, "COLUMNS": "200"}


def test_the_wheel_is_tagged_for_this_platform_and_carries_the_emulator() -> None:
    wheel = _wheel()
    _, _, _, tags = parse_wheel_filename(wheel.name)
    assert {(t.interpreter, t.abi) for t in tags} == {("py3", "none")}, "the binary does not depend on Python's"
    assert all(t.platform.startswith("manylinux_") for t in tags), tags
    assert tags & set(sys_tags()), f"{wheel.name} does not install on this interpreter"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        binary = [n for n in names if n.endswith(".data/scripts/tunbench-link")]
        assert binary and zf.getinfo(binary[0]).external_attr >> 16 & 0o111, "tunbench-link is not executable"
        assert "tunbench/tunnels/builtin/wireguard-go.toml" in names and "tunbench/store/schema.sql" in names


def test_the_installed_wheel_runs_outside_the_checkout(tmp_path: Path) -> None:
    wheel = _wheel()
    assert not tmp_path.resolve().is_relative_to(REPO)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=_env(), timeout=120)
    res = subprocess.run(
        [str(venv / "bin/pip"), "install", "-q", "--disable-pip-version-check", str(wheel)],
        capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr

    def tb(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [str(venv / "bin/tunbench"), *args], capture_output=True, text=True, env=_env(), cwd=tmp_path,
            timeout=timeout,
        )  # fmt: skip
        STARTED.update(RUN_LINE.findall(out.stdout))
        return out

    where = subprocess.run(
        [str(venv / "bin/python"), "-c", "import tunbench; print(tunbench.__file__)"],
        capture_output=True, text=True, env=_env(), cwd=tmp_path, check=True,
    ).stdout.strip()  # fmt: skip
    assert Path(where).is_relative_to(venv), where

    doctor = tb("doctor")
    assert f"✓ tunbench-link (WAN emulator): {venv}/bin/tunbench-link" in doctor.stdout, doctor.stdout
    assert "✓ workload iperf3" in doctor.stdout and "✓ tunnel socat: ok" in doctor.stdout

    # the selftest's bounds are a benchmark of the host (docs/benchmarks/emulator.md); here: every step measured
    selftest = tb("link", "selftest", "--quick", "--json", str(tmp_path / "selftest.json"))
    assert selftest.returncode in (0, 1), selftest.stdout + selftest.stderr
    results = json.loads((tmp_path / "selftest.json").read_text())
    assert len(results) >= 10
    assert not [r["name"] for r in results if r["detail"].startswith("could not measure")], selftest.stdout

    out = tmp_path / "out.json"
    run = tb(
        "run", "-t", "socat", "--profile", "d5:delay=5ms", "--duration", "1", "--omit", "0", "--repeat", "1",
        "--direction", "up", "--db", str(tmp_path / "r.db"), "--json", str(out),
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    doc = json.loads(out.read_text())
    assert {t["label"] for t in doc["trials"]} == {"direct", "socat"}
    for t in doc["trials"]:
        assert t["status"] == "ok", t["error"]
        assert t["throughput_bps"] > 1e6
        assert t["metrics"]["link.up.delivered_packets"] > 0, "the emulated link carried nothing"
    source = doc["run"]["provenance"]["tunnels"]["socat"]["source"]
    assert Path(source).is_relative_to(venv), source
