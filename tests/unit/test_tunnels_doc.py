"""docs/tunnels.md lists every built-in adapter and every parameter it declares, with its default: the table
once left out `ping` and `ping_restart` (openvpn-udp) and `dpd` and `mobike` (strongswan), which the docs use."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILTIN = sorted((ROOT / "src" / "tunbench" / "tunnels" / "builtin").glob("*.toml"))


def _rows() -> dict[str, str]:
    rows = {}
    for line in (ROOT / "docs" / "tunnels.md").read_text().splitlines():
        if m := re.match(r"\| (`[^|]+`) \|[^|]*\|(.*)\|\s*$", line):
            for name in re.findall(r"`([\w-]+)`", m.group(1)):
                rows[name] = m.group(2)
    return rows


@pytest.mark.parametrize("path", BUILTIN, ids=[p.stem for p in BUILTIN])
def test_every_parameter_is_listed_with_its_default(path: Path) -> None:
    params = tomllib.loads(path.read_text()).get("params", {})
    row = _rows().get(path.stem)
    assert row is not None, f"{path.stem} has no row in docs/tunnels.md"
    for key, default in params.items():
        m = re.search(rf"`{re.escape(key)}` \[([^\]]*)", row)
        assert m is not None, f"{path.stem}: parameter {key} is not in its row"
        assert str(default) in m.group(1) or str(default) in row, f"{path.stem}: {key}'s default {default!r}"


def test_the_parameters_the_docs_use_are_there() -> None:
    rows = _rows()
    assert "`ping`" in rows["openvpn-udp"] and "`ping_restart`" in rows["openvpn-udp"]
    assert "`dpd`" in rows["strongswan"] and "`mobike`" in rows["strongswan"]
