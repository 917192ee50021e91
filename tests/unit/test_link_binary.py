"""Where tunbench finds tunbench-link (link/binary.py): TUNBENCH_LINK, the checkout's build, the one the
wheel installed beside `tunbench`, then PATH."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

from tunbench.link import binary


def _exe(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No TUNBENCH_LINK, no checkout build, an empty PATH: an installed wheel's situation."""
    monkeypatch.delenv("TUNBENCH_LINK", raising=False)
    monkeypatch.setattr(binary, "REPO_BINARY", tmp_path / "checkout/link/target/release/tunbench-link")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    return tmp_path


def test_the_wheels_binary_is_found_beside_tunbench_without_path(
    elsewhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripts = elsewhere / "venv/bin"
    real = sysconfig.get_path
    monkeypatch.setattr(sysconfig, "get_path", lambda name, *a, **k: str(scripts) if name == "scripts" else real(name))
    assert binary.link_binary_or_none() is None
    installed = _exe(scripts / "tunbench-link")
    assert binary.link_binary_or_none() == installed
    # a checkout's own build wins over an installed one, TUNBENCH_LINK over both
    built = _exe(binary.REPO_BINARY)
    assert binary.link_binary_or_none() == built
    chosen = _exe(elsewhere / "mine/tunbench-link")
    monkeypatch.setenv("TUNBENCH_LINK", str(chosen))
    assert binary.link_binary_or_none() == chosen


def test_path_is_the_last_resort(elsewhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sysconfig, "get_path", lambda name, *a, **k: str(elsewhere / "no-scripts"))
    on_path = _exe(elsewhere / "empty/tunbench-link")
    assert binary.link_binary_or_none() == on_path
