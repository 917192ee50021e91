"""Scenario loading: defaults, overrides, and errors that name file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunbench.config.load import load_scenario, with_overrides
from tunbench.errors import ConfigError
from tunbench.tomlfile import locate


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "scenario.toml"
    p.write_text(text)
    return p


def test_default_scenario_loads() -> None:
    sc, text, source = load_scenario(None)
    assert "direct" not in sc.run.tunnels and sc.run.direct
    assert sc.run.repeat >= 3 and "wireguard-go" in sc.run.tunnels
    assert "[run]" in text and source == "<default scenario>"


def test_overrides_apply_only_given_values(tmp_path: Path) -> None:
    sc, _, _ = load_scenario(write(tmp_path, "[workload]\nflows = [1, 2]\nduration_s = 7\n"))
    sc2 = with_overrides(sc, {"workload": {"flows": [10], "duration_s": None}, "run": {"repeat": 4}})
    assert sc2.workload.flows == [10] and sc2.workload.duration_s == 7 and sc2.run.repeat == 4


@pytest.mark.parametrize(
    ("text", "line", "key", "msg"),
    [
        ("[run]\nrepeat = 3\n\n[workload]\nflows = [1, 0]\n", 5, "workload.flows", "between 1 and 128"),
        ("[run]\nrepeat = 0\n", 2, "run.repeat", "greater than or equal to 1"),
        ("[run]\nrepaet = 3\n", 2, "run.repaet", "unknown key"),
        ("[workload]\ndirections = ['sideways']\n", 2, "workload.directions.0", "'up'"),
        ('[sysctl]\n"net.ipv4.tcp_rmem" = "1 2 3"\n"kernel.panic" = "1"\n', 3, "sysctl.kernel.panic.[key]", "net.*"),
    ],
)
def test_errors_name_file_line_key(tmp_path: Path, text: str, line: int, key: str, msg: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_scenario(path)
    e = exc.value
    assert e.source == str(path) and e.line == line and e.key == key
    assert msg in str(e)
    assert str(e).startswith(f"{path}:{line}: {key}: ")


def test_syntax_error_has_line(tmp_path: Path) -> None:
    path = write(tmp_path, '[run]\nrepeat = 3\ntunnels = ["a"\n')
    with pytest.raises(ConfigError) as exc:
        load_scenario(path)
    assert exc.value.line is not None and "TOML syntax error" in str(exc.value)


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_scenario(Path("/nonexistent/x.toml"))


def test_locate_tables_arrays_and_dotted_keys() -> None:
    text = "a = 1\n[t]\nb = 2\nc.d = 3\n[[arr]]\nx = 1\n[[arr]]\ny = 2\n"
    assert locate(text, ["a"]) == 1
    assert locate(text, ["t", "b"]) == 3
    assert locate(text, ["t", "c", "d"]) == 4
    assert locate(text, ["arr", 1, "y"]) == 8
    assert locate(text, ["arr", 1]) == 7
    assert locate(text, ["arr", 0, "x"]) == 6
    assert locate(text, ["t", "missing"]) == 2  # falls back to the enclosing table
    assert locate(text, ["nothing"]) is None
