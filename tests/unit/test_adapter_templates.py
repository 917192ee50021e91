"""Adapter templates are checked when the file loads (found by the parser fuzz test: a lone `{` was a
ValueError traceback, and `requires = ["{bin}"]` without a `bin` parameter failed without a line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunbench.errors import ConfigError
from tunbench.tunnels.adapter import load_adapter

HEAD = "name = 'x'\nlayer = 'l4'\n"
TAIL = "\n[target]\naddress = '127.0.0.1'\n"


@pytest.mark.parametrize(
    ("body", "line", "key", "needle"),
    [
        ("requires = ['{']\n", 3, "requires[0]", "Single '{'"),
        ("requires = ['{bin}']\n", 3, "requires[0]", "{bin} is not a parameter (known: none)"),
        ("[params]\nbin = 'socat'\n\n[server]\ndaemon = '{bin} {0}'\n", 7, "server.daemon", "bad template"),
        ("[[keys]]\nname = 'k'\nrun = 'echo }'\n", 5, "keys[0].run", "Single '}'"),
    ],
)
def test_bad_templates_fail_at_load(tmp_path: Path, body: str, line: int, key: str, needle: str) -> None:
    p = tmp_path / "a.toml"
    p.write_text(HEAD + body + TAIL)
    with pytest.raises(ConfigError) as e:
        load_adapter(p)
    assert e.value.line == line and e.value.key == key and needle in str(e.value) and str(p) in str(e.value)


def test_literal_braces_and_known_variables_load(tmp_path: Path) -> None:
    p = tmp_path / "a.toml"
    p.write_text(
        HEAD + "requires = ['{bin}']\n[params]\nbin = 'socat'\n[server]\ndaemon = \"sh -c 'echo {{}} {port}'\"\n" + TAIL
    )
    assert load_adapter(p).spec.requires == ["{bin}"]
