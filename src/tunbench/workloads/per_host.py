"""Per-host figures of a fleet spread over several client hosts (sites/hosts_fleet.py): each aggregate
metric `clients.X` has a per-host twin `clients.host.<name>.X`, computed from that host's clients alone.
The report's tables draw one sub-row per host from these names, for the hosts a trial records in
params.net.clients.hosts (report/headlines.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from tunbench.workloads.fleet_metrics import HOST_PREFIX, PREFIX, on

T = TypeVar("T")


def host_key(key: str, host: str) -> str | None:
    """The per-host twin of a `clients.` metric name (its ``{on}`` for that host: fleet_metrics.py); None for
    another name (it has no per-host figure)."""
    if not key.startswith(PREFIX) or key.startswith(HOST_PREFIX):
        return None
    return PREFIX + on(host) + key.removeprefix(PREFIX)


def by_host(host_of: Mapping[int, str], values: Mapping[int, T]) -> dict[str, dict[int, T]]:
    """`values` (by client index) split by the host each client ran on."""
    out: dict[str, dict[int, T]] = {}
    for i, v in values.items():
        out.setdefault(host_of[i], {})[i] = v
    return out


def lost_indices(host_of: Mapping[int, str], lost: Mapping[str, str]) -> set[int]:
    """The clients of the hosts in `lost` (host -> why), by index: a lost client host's share of a fleet."""
    return {i for i, h in host_of.items() if h in lost}


def without(values: Mapping[int, T], gone: set[int]) -> dict[int, T]:
    return {i: v for i, v in values.items() if i not in gone}
