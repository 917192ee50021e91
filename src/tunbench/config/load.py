"""Scenario file + flags -> Scenario. Every error names the file (or flag), line and key."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from tunbench.config.schema import Scenario
from tunbench.config.tomlfile import parse_toml, read_toml, validate

DEFAULT_SOURCE = "<default scenario>"


def default_text() -> str:
    return resources.files("tunbench.config").joinpath("default.toml").read_text()


def load_scenario(path: Path | None) -> tuple[Scenario, str, str]:
    """Returns (scenario, its text, its source name)."""
    if path is None:
        text = default_text()
        data = parse_toml(text, DEFAULT_SOURCE)
        source = DEFAULT_SOURCE
    else:
        data, text = read_toml(path)
        source = str(path)
    return validate(Scenario, data, text=text, source=source), text, source


def with_overrides(scenario: Scenario, overrides: dict[str, dict[str, Any]]) -> Scenario:
    """Apply flag values (only those given) on top of the file, re-validating the result."""
    data = scenario.model_dump()
    for section, values in overrides.items():
        for key, value in values.items():
            if value is not None:
                data[section][key] = value
    return validate(Scenario, data, text="", source="command line")
