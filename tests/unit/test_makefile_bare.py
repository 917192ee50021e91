"""The Makefile takes a bare Debian to `make demo` (issue 48): `make deps` installs python3-venv and, when there
is no cargo, Debian's Rust toolchain; `make venv` and `make build` run on their own install what they need
first; cargo is looked up when a recipe runs. Read with `make -n` (prints the recipes, runs none; only the
Makefile's $(shell) look-ups run). The end-to-end check is `make bare-debian12` / `make bare-debian13`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def make_n(*args: str, home: Path | None = None) -> str:
    env = dict(os.environ)
    env.pop("CARGO", None)
    env.pop("MAKEFLAGS", None)
    if home is not None:
        env["HOME"] = str(home)
    out = subprocess.run(
        ["make", "--no-print-directory", "-n", "-C", str(ROOT), *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def os_release(tmp_path: Path, codename: str) -> str:
    path = tmp_path / f"os-release-{codename}"
    path.write_text(f'ID=debian\nVERSION_CODENAME={codename}\nPRETTY_NAME="Debian ({codename})"\n')
    return f"OS_RELEASE={path}"


@pytest.mark.parametrize(
    ("codename", "toolchain"),
    [("bookworm", "rustc-web cargo-web"), ("trixie", "rustc-web cargo-web"), ("forky", "rustc cargo")],
)
def test_deps_installs_python3_venv_and_a_toolchain_only_without_cargo(
    tmp_path: Path, codename: str, toolchain: str
) -> None:
    recipe = make_n("deps", os_release(tmp_path, codename))
    assert "python3-venv" in recipe
    # the toolchain joins the package list only when the shell finds no cargo (rustup's ~/.cargo/bin is on PATH)
    assert f'command -v cargo >/dev/null || rust="{toolchain}"' in recipe
    assert "$rust; do dpkg-query" in recipe
    assert "DEBIAN_FRONTEND=noninteractive apt-get install -y" in recipe


def test_venv_alone_installs_python3_venv_first() -> None:
    # -W: as if pyproject.toml had changed, so the venv's recipe is printed after what it needs
    recipe = make_n("-W", "pyproject.toml", "venv")
    assert "python3-venv" in recipe
    assert recipe.index("python3-venv") < recipe.index("python3 -m venv")


def test_build_alone_installs_a_toolchain_first(tmp_path: Path) -> None:
    recipe = make_n("-W", "link/Cargo.toml", "build", os_release(tmp_path, "bookworm"), home=tmp_path)
    assert recipe.index('rust="rustc-web cargo-web"') < recipe.index("build --release --locked")


def test_cargo_prefers_rustup_then_path(tmp_path: Path) -> None:
    # no ~/.cargo/bin/cargo: the cargo on PATH (Debian's /usr/bin/cargo), or plain `cargo` when there is none
    recipe = make_n("-W", "link/Cargo.toml", "link/target/release/tunbench-link", home=tmp_path)
    on_path = shutil.which("cargo")
    assert f"cd link && {on_path or 'cargo'} build" in recipe
    # rustup's, when there
    cargo = tmp_path / ".cargo" / "bin" / "cargo"
    cargo.parent.mkdir(parents=True)
    cargo.write_text("#!/bin/sh\n")
    cargo.chmod(0o755)
    recipe = make_n("-W", "link/Cargo.toml", "link/target/release/tunbench-link", home=tmp_path)
    assert f"cd link && {cargo} build" in recipe


def test_cargo_is_resolved_when_a_recipe_runs() -> None:
    # a recursive variable: `make demo` finds the cargo its own `make deps` step installed
    makefile = (ROOT / "Makefile").read_text()
    (line,) = [x for x in makefile.splitlines() if x.startswith("CARGO ")]
    assert line.startswith("CARGO ?= ") or line.startswith("CARGO = ")


def test_netperf_is_opt_in_and_only_the_test_targets_opt_in() -> None:
    """netperf is in Debian's non-free component: `make deps` and `make demo` never enable it; the suite's
    targets ask for it by name."""
    import re

    makefile = (ROOT / "Makefile").read_text()
    prereqs = {m[1]: m[2].split() for m in re.finditer(r"^([a-z0-9-]+):([^=\n]*)$", makefile, re.M)}
    assert "netperf" not in prereqs["deps"] and "netperf" not in prereqs["demo"]
    assert prereqs["test"][0] == "netperf" and prereqs["integration"][0] == "netperf"
