"""`make netperf` (and so `make deps`): scripts/apt-non-free.sh enables Debian's non-free component for netperf
in a file of its own, from the system's own Debian mirror, only where apt has no candidate for netperf. Run
against a copy of a deb822 debian.sources with apt-cache and apt-get replaced by stubs on PATH (nothing under
/etc/apt is read or written)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts/apt-non-free.sh"

DEBIAN_SOURCES = """\
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def run_script(tmp_path: Path, candidate: str) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    calls = tmp_path / "apt-get.calls"
    policy = f"netperf:\n  Installed: (none)\n  Candidate: {candidate}\n"
    (stubs / "apt-cache").write_text(f"#!/bin/sh\nprintf '{policy}'\n")
    (stubs / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    sources = tmp_path / "debian.sources"
    sources.write_text(DEBIAN_SOURCES)
    out = tmp_path / "tunbench-non-free.sources"
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "SOURCES": str(sources), "OUT": str(out)}
    res = subprocess.run(["sh", str(SCRIPT)], env=env, capture_output=True, text=True, check=False)
    return res, out, calls


def test_no_candidate_adds_non_free_of_the_same_mirror_and_updates(tmp_path: Path) -> None:
    res, out, calls = run_script(tmp_path, "(none)")
    assert res.returncode == 0, res.stderr
    lines = out.read_text().splitlines()
    assert "URIs: http://deb.debian.org/debian" in lines  # the mirror, not its -security archive
    assert "Suites: bookworm bookworm-updates" in lines
    assert "Components: non-free" in lines
    assert "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" in lines
    assert calls.read_text().split() == ["update", "-q"]
    # a second run leaves the file and apt alone
    calls.unlink()
    res, _, _ = run_script(tmp_path, "(none)")
    assert res.returncode == 0 and not calls.exists()


def test_a_candidate_changes_nothing(tmp_path: Path) -> None:
    res, out, calls = run_script(tmp_path, "2.7.0-0.1")
    assert res.returncode == 0, res.stderr
    assert not out.exists() and not calls.exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_netperf_installs_it_through_the_script_and_make_deps_does_not() -> None:
    """netperf is opt-in (Debian's non-free component): `make netperf` enables it, `make deps` never does."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "CARGO")}

    def recipe(target: str) -> str:
        argv = ["make", "--no-print-directory", "-n", "-C", str(ROOT), target]
        return subprocess.run(argv, env=env, capture_output=True, text=True).stdout

    netperf = recipe("netperf")
    assert "sh scripts/apt-non-free.sh" in netperf
    assert "for p in netperf; do dpkg-query" in netperf
    deps = recipe("deps")
    assert "apt-non-free.sh" not in deps and "netperf" not in deps
