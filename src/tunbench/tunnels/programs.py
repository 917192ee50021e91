"""A build given by path (`wireguard-go[bin=./wireguard-go]`) runs from each trial's private directory, where a
relative path means nothing. So a relative program path is made absolute once, before the run: against the
directory tunbench was started in for `--tunnel`, against the scenario file's own directory for the file's
`run.tunnels`. The absolute path is what the checks test, what runs, and what each trial records.

A program parameter is one the adapter's `requires` names whole (`{bin}`, `{sshd}`, `{swanctl}`). A bare name
(`bin=wireguard-go`) is left alone: it is looked up on PATH, as a shell would."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from tunbench.errors import ConfigError
from tunbench.tunnels.adapter import AdapterSpec
from tunbench.tunnels.registry import TunnelRef, find_adapter

_WITH_PARAMS = re.compile(r"^(?P<name>[^\[\]]+?)\[(?P<params>[^\]]*)\]$")


def program_params(spec: AdapterSpec) -> set[str]:
    """The adapter's parameters that name a program: those its `requires` lists whole."""
    return {name for name in spec.params if f"{{{name}}}" in spec.requires}


def absolute(value: str, base: Path) -> str:
    """A program path made absolute against `base` (`~` expanded); a bare name or an absolute path as is."""
    path = os.path.expanduser(value)
    if "/" not in path or os.path.isabs(path):
        return path
    return os.path.normpath(os.path.join(os.path.abspath(base), path))


def absolute_programs(ref: TunnelRef, base: Path) -> TunnelRef:
    """`ref` with each program parameter it sets given as an absolute path (resolved against `base`)."""
    programs = program_params(ref.adapter.spec)
    params = {k: absolute(v, base) if k in programs else v for k, v in ref.params.items()}
    return ref if params == ref.params else dataclasses.replace(ref, params=params)


def rebased(text: str, base: Path) -> str:
    """A tunnel reference as written in a scenario file, its program paths made absolute against the file's
    directory `base`. A reference that does not parse, or names an unknown adapter, is returned as written:
    resolving it later reports the error with the file's line. (Without `label=`, the label derived from it
    then names the absolute path; a `--tunnel`'s keeps the path as written.)"""
    m = _WITH_PARAMS.match(text.strip())
    if not m:
        return text
    try:
        programs = program_params(find_adapter(m.group("name").strip()).spec)
    except ConfigError:
        return text
    items = []
    for item in m.group("params").split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip() in programs:
            item = f"{key.strip()}={absolute(value.strip(), base)}"
        items.append(item)
    return f"{m.group('name')}[{','.join(items)}]"


def built(ref: TunnelRef) -> list[str]:
    """The program paths a reference sets (`bin=/abs/wireguard-go`), for the plan to show what will run."""
    programs = program_params(ref.adapter.spec)
    return [f"{k}={v}" for k, v in ref.params.items() if k in programs]
