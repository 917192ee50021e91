"""Scenario file + flags -> Scenario. Every error names the file (or flag), line and key."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tunbench.config.schema import Scenario
from tunbench.errors import ConfigError
from tunbench.tomlfile import locate, parse_toml, read_toml, validate

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
        _rebase_tunnels(data, path.parent)
    scenario = validate(Scenario, data, text=text, source=source)
    check_workloads(scenario, text, source)
    return scenario, text, source


def _rebase_tunnels(data: dict[str, Any], base: Path) -> None:
    """A scenario file's tunnels name their builds relative to the file (`bin=./wireguard-go`): made absolute
    here, once, so they mean the same from any directory (tunnels/programs.py)."""
    from tunbench.tunnels.programs import rebased

    run = data.get("run")
    if isinstance(run, dict) and isinstance(run.get("tunnels"), list):
        run["tunnels"] = [rebased(t, base) if isinstance(t, str) else t for t in run["tunnels"]]


def check_workloads(scenario: Scenario, text: str, source: str) -> dict[str, BaseModel]:
    """Every kind is known, and each `[workload.<kind>]` table is valid for it. Returns the options."""
    from tunbench import workloads

    wl = scenario.workload
    extra = wl.model_extra or {}
    options: dict[str, BaseModel] = {}
    for i, kind in enumerate(wl.kind):
        if kind not in workloads.REGISTRY:
            raise ConfigError(
                f"unknown workload {kind!r} (known: {', '.join(sorted(workloads.REGISTRY))})",
                source=source,
                line=locate(text, ["workload", "kind"]) if text else None,
                key=f"workload.kind[{i}]",
            )
    # a one-way workload's bidir case would fail every trial (udp: one iperf3 UDP sender) or silently
    # measure upload only (clients)
    one_way = [k for k in wl.kind if workloads.REGISTRY[k].one_way]
    if one_way and "bidir" in wl.directions:
        raise ConfigError(
            f"bidir is not supported by {', '.join(one_way)} (they measure one direction at a time: "
            "use up and/or down, or run bidir iperf3 in a run of its own)",
            source=source,
            line=locate(text, ["workload", "directions"]) if text else None,
            key="workload.directions",
        )
    for key, raw in extra.items():
        if key not in workloads.REGISTRY:
            raise ConfigError(
                f"unknown key (workloads: {', '.join(sorted(workloads.REGISTRY))})",
                source=source,
                line=locate(text, ["workload", key]) if text else None,
                key=f"workload.{key}",
            )
        if not isinstance(raw, dict):
            raise ConfigError(
                "must be a table of options",
                source=source,
                line=locate(text, ["workload", key]) if text else None,
                key=f"workload.{key}",
            )
        options[key] = validate(
            workloads.REGISTRY[key].Options,
            raw,
            text=text,
            source=source,
            key_prefix=f"workload.{key}",
            locate_prefix=["workload", key],
        )
    for kind in wl.kind:
        options.setdefault(kind, workloads.REGISTRY[kind].options(None))
    return options


def with_overrides(scenario: Scenario, overrides: dict[str, dict[str, Any]]) -> Scenario:
    """Apply flag values (only those given) on top of the file, re-validating the result."""
    data = scenario.model_dump()
    for section, values in overrides.items():
        for key, value in values.items():
            if value is not None:
                data[section][key] = value
    scenario = validate(Scenario, data, text="", source="command line")
    check_workloads(scenario, "", "command line")
    return scenario
