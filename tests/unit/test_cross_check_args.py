"""scripts/hand_vs_tunbench.py is scripts/cross_check.py's throughput check through wireguard-go with a warm-up
second, nothing of its own: its options reach cross_check.py, and one given overrides its defaults."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture
def scripts(monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, ModuleType]:
    monkeypatch.syspath_prepend(str(SCRIPTS))
    return importlib.import_module("cross_check"), importlib.import_module("hand_vs_tunbench")


def test_hand_vs_tunbench_is_the_cross_checks_throughput_through_wireguard_go(
    scripts: tuple[ModuleType, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    cross_check, hand_vs_tunbench = scripts
    seen: list[list[str]] = []
    monkeypatch.setattr(cross_check, "main", lambda argv: seen.append(argv) or 0)
    assert hand_vs_tunbench.main(["--rounds", "6", "--sysctl", "net.ipv4.tcp_rmem=4096 131072 33554432"]) == 0
    args = cross_check.parse_args(seen[0])
    assert (args.only, args.via, args.omit, args.rounds) == ("throughput", "wireguard-go", 1, 6)
    assert args.sysctl == [("net.ipv4.tcp_rmem", "4096 131072 33554432")]
    assert hand_vs_tunbench.main(["--omit", "0"]) == 0
    assert cross_check.parse_args(seen[1]).omit == 0  # the caller's own value wins
    assert not hasattr(hand_vs_tunbench, "hand_once")  # the measuring is cross_check.py's alone


def test_a_sysctl_without_a_value_is_refused(
    scripts: tuple[ModuleType, ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    cross_check, _ = scripts
    with pytest.raises(SystemExit) as e:
        cross_check.parse_args(["--sysctl", "net.core.rmem_max"])
    assert e.value.code == 2 and "'net.core.rmem_max' is not KEY=VALUE" in capsys.readouterr().err
