"""Every example scenario loads, and names only tunnels and profiles that exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunbench.config.load import load_scenario
from tunbench.link.profile import find_profile
from tunbench.session import resolve_tunnels

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.toml"))


def test_there_are_examples() -> None:
    assert {p.stem for p in EXAMPLES} >= {"jmux", "miragevpn", "postgres-vpn"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_loads(path: Path) -> None:
    sc, _, source = load_scenario(path)
    refs = resolve_tunnels(sc, source)
    assert refs[0].name == "direct" or not sc.run.direct
    for prof in sc.run.profiles:
        find_profile(prof)
