"""scripts/instr_spread.py's reading of a callgrind dump's call counts, and its pair statistic."""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

DUMP = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
cmd:  /usr/bin/wireguard-go -f tb1-tc
positions: line
events: Ir
ob=(1) /usr/bin/wireguard-go
fl=(1) ???
fn=(1) 0x0000000000401000
0 10
cfn=(2) 0x0000000000402000
calls=3 0
0 30
cob=(2) /usr/lib/x86_64-linux-gnu/libc.so.6
cfi=(2) ???
cfn=(3) read
calls=2 0
0 20
cfn=(2)
calls=1 0
0 5
fn=(2)
0 40
cob=(2)
cfn=(3)
calls=4 0
0 8
"""


@pytest.fixture
def spread(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(SCRIPTS))
    return importlib.import_module("instr_spread")


def test_calls_are_summed_per_callee_in_its_own_object(spread: ModuleType, tmp_path: Path) -> None:
    """A callee named without `cob=` is in the caller's object; compressed names `(n)` are looked up."""
    dump = tmp_path / "001-base-r1.client.7.1.callgrind"
    dump.write_text(DUMP)
    calls = spread.calls_by_function(dump, lambda obj, fn: f"{Path(obj).name}:{fn}")
    assert calls == {"wireguard-go:0x0000000000402000": 4, "libc.so.6:read": 6}


def test_the_pair_sd_is_of_the_log_ratio(spread: ModuleType) -> None:
    kept = [(1.0, 0.9, 1.01, 0.9), (1.0, 0.9, 0.99, 0.9), (2.0, 1.0, 2.0, 1.01)]
    assert spread._sd(kept, 0) == pytest.approx(
        math.sqrt(sum((x - 0.0) ** 2 for x in (math.log(1.01), math.log(0.99), 0.0)) / 2), rel=1e-3
    )
    assert spread._sd(kept, 1) == pytest.approx(
        (lambda d: math.sqrt(sum((x - sum(d) / 3) ** 2 for x in d) / 2))([0.0, 0.0, math.log(1.01)])
    )
