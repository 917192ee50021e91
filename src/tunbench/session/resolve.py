"""What a scenario's references name, resolved: each tunnel (its adapter, parameters and programs, the run's
IP families) and each WAN profile (checked by tunbench-link where it emulates a link). An error about an entry
of the scenario names its line and the entry."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tunbench.config.schema import Scenario
from tunbench.errors import ConfigError, DependencyMissing
from tunbench.link.profile import Profile, builtin_dir, find_profile, validate_with_link
from tunbench.tomlfile import dotted, locate
from tunbench.tunnels.programs import absolute_programs
from tunbench.tunnels.registry import TunnelRef, parse_ref

T = TypeVar("T")


def _ref_error(e: ConfigError, source: str, text: str, key: str, index: int) -> ConfigError:
    """An error about a reference in the scenario (not inside the adapter or profile file it names) gets the
    scenario's line and the list key."""
    if e.source != source:
        return e
    return ConfigError(
        e.detail, source=source, line=locate(text, key.split(".")) if text else None, key=f"{key}[{index}]"
    )


def _resolve_each(items: list[str], resolve: Callable[..., T], source: str, text: str, key: str) -> list[T]:
    """Each reference of a scenario list (run.tunnels, run.profiles) resolved; an error about an entry
    names the scenario's line and the entry (`run.tunnels[1]`)."""
    out = []
    for i, item in enumerate(items):
        try:
            out.append(resolve(item, source=source))
        except ConfigError as e:
            raise _ref_error(e, source, text, key, i) from None
    return out


def resolve_tunnels(scenario: Scenario, source: str, text: str = "") -> list[TunnelRef]:
    """`text`: the scenario file's text, when run.tunnels came from it (for the line of an error). A relative
    program path still in a reference came from `--tunnel` (a scenario file's were made absolute when it was
    loaded): it is made absolute against the directory tunbench was started in."""
    refs = _resolve_each(scenario.run.tunnels, parse_ref, source, text, "run.tunnels")
    refs = [absolute_programs(r, Path.cwd()) for r in refs]
    if scenario.run.direct and not any(r.name == "direct" for r in refs):
        refs.insert(0, parse_ref("direct"))
    labels = [r.label for r in refs]
    dup = {lb for lb in labels if labels.count(lb) > 1}
    if dup:
        raise ConfigError(
            f"tunnel label(s) used twice: {', '.join(sorted(dup))}; add label=... to tell them apart",
            source=source,
            line=locate(text, ["run", "tunnels"]) if text else None,
            key="run.tunnels",
        )
    topo = scenario.topology  # every tunnel runs with the run's IP families (plan.ip_refusal checks them)
    return [dataclasses.replace(r, underlay=topo.underlay, overlay=topo.overlay) for r in refs]


def resolve_profiles(scenario: Scenario, source: str, notes: list[str] | None = None, text: str = "") -> list[Profile]:
    """`notes`: a dry run's list; a missing tunbench-link is noted there (its values go unchecked)
    instead of raised. `text`: the scenario file's text, when run.profiles came from it."""
    profiles = _resolve_each(scenario.run.profiles, find_profile, source, text, "run.profiles")
    for i, (ref, prof) in enumerate(zip(scenario.run.profiles, profiles, strict=True)):
        if not prof.emulated:
            continue
        try:
            validate_with_link(prof)
        except DependencyMissing as e:
            if notes is None:
                raise
            notes.append(f"profile {prof.name} not checked by tunbench-link: {e}")
        except ConfigError as e:  # name the profile's file and line, or the scenario's entry of an inline one
            raise _link_error(e, ref, i, source, text) from None
    names = [p.name for p in profiles]
    if len(set(names)) != len(names):
        raise ConfigError(
            "a profile is listed twice",
            source=source,
            line=locate(text, ["run", "profiles"]) if text else None,
            key="run.profiles",
        )
    return profiles


def _link_error(e: ConfigError, ref: str, index: int, source: str, text: str) -> ConfigError:
    """tunbench-link refused a profile's value (`e.key` = up.delay...): point at where that value is."""
    if e.line is not None:  # already placed (a timeline's row)
        return e
    if ":" not in ref:  # a file (given, or a built-in)
        path = Path(ref) if "/" in ref or ref.endswith(".toml") else builtin_dir() / f"{ref}.toml"
        try:
            line = locate(path.read_text(encoding="utf-8"), dotted(e.key)) if e.key else None
        except (OSError, UnicodeDecodeError):
            line = None
        return ConfigError(e.detail, source=str(path), line=line, key=e.key)
    key = f"run.profiles[{index}]" + (f": {e.key}" if e.key else "")
    return ConfigError(e.detail, source=source, line=locate(text, ["run", "profiles"]) if text else None, key=key)
