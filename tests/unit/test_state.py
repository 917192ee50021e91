"""The run ledger's state file: never a half-written file left behind, even when interrupted mid-write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunbench.host import ledger as state


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(state, "STATE_DIR", tmp_path)
    return tmp_path


def test_interrupt_during_save_leaves_no_temp_file(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = state.Ledger.open("tbabc123")

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(state.json, "dump", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ledger.add_netns("tbabc123-c")
    assert sorted(p.name for p in state_dir.iterdir()) == ["tbabc123.json"]


def test_close_removes_the_ledger_and_stray_temps_of_this_run_only(state_dir: Path) -> None:
    ledger = state.Ledger.open("tbabc123")
    (state_dir / ".tbabc123.x1y2z3").write_text("{")
    (state_dir / ".tbdef456.q9w8e7").write_text("{")
    ledger.close()
    assert sorted(p.name for p in state_dir.iterdir()) == [".tbdef456.q9w8e7"]


def test_close_keeps_the_ledger_while_it_still_lists_objects(state_dir: Path) -> None:
    ledger = state.Ledger.open("tbabc123")
    ledger.add_path("/tmp/tbabc123-keys")
    ledger.close()
    saved = json.loads((state_dir / "tbabc123.json").read_text())
    assert saved["paths"] == ["/tmp/tbabc123-keys"]
