"""The network settings (a trial's ``params["net"]``) that differ between A and B, one line each (pure).

A run on --hosts records less per trial: the roles run in the hosts' own namespaces, whose sysctls it does
not read, so ``params["net"]`` holds only the devices tunbench made there (the egress, the clients'), or
nothing. What it records of each host is in the run's provenance (``provenance["hosts"]``: remote/facts.py):
its kernel and the NIC carrying the underlay (MTU, driver, offloads). Those are the settings compared for it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from tunbench.results import TrialRecord

_NOT_SET = "–"


_RUN_PREFIX = re.compile(r"\btb[0-9a-f]{6}-([a-z]+)\d*(?=\.|$)")
"""Interface names carry the run's prefix (tb + 6 hex digits) and, where one run holds several tunnels (two
labels of an A/B), the tunnel's slot number after the role's letters (`-vc`, `-vc1`): one key per interface
across runs and slots."""


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """{"client": {"tcp_rmem": "4096 ..."}} -> {"client.tcp_rmem": "4096 ..."}; leaves as text."""
    out: dict[str, str] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, list | tuple):
            out[name] = " ".join(str(v) for v in value)
        else:
            out[name] = str(value)
    return out


def host_settings(hosts: Mapping[str, Any]) -> dict[str, list[str]]:
    """What a --hosts run recorded of its hosts' settings (its ``provenance["hosts"]``), keyed as a trial's
    ``params["net"]`` is where they mean the same: ``kernel`` (each host's), and per role the NIC that
    carries the underlay: ``client.nic.mtu``, ``client.nic.driver``, ``client.nic.offloads.gso``..."""
    seen: dict[str, dict[str, None]] = defaultdict(dict)
    for facts in hosts.values():
        if not isinstance(facts, dict):
            continue
        if kernel := (facts.get("host") or {}).get("kernel"):
            seen["kernel"][str(kernel)] = None
        nic = facts.get("nic") or {}
        named = {k: nic.get(k) for k in ("mtu", "driver")} | {
            f"offloads.{k}": v for k, v in (nic.get("offloads") or {}).items()
        }
        for role in str(facts.get("role", "")).split(", "):
            for key, value in named.items():
                if role and value is not None:
                    seen[f"{role}.nic.{key}"][str(value)] = None
    return {k: list(v) for k, v in seen.items()}


def _side_settings(
    trials: list[TrialRecord], hosts: Mapping[str, Any] | None = None
) -> tuple[dict[str, list[str]], bool]:
    """Values seen per flattened ``params["net"]`` key (in trial order, unique), and whether any trial lacks
    it. On --hosts (`hosts`: the run's provenance of them), the hosts' settings too, and a trial with an
    empty ``params["net"]`` lacks nothing (it had nothing of its own to record)."""
    seen: dict[str, dict[str, None]] = defaultdict(dict)
    missing = False
    for t in trials:
        net = t.params.get("net") if isinstance(t.params, dict) else None
        if not isinstance(net, dict) or not net:
            missing = missing or not (hosts and isinstance(net, dict))
            continue
        for key, value in flatten(net).items():
            seen[_RUN_PREFIX.sub(r"<run>-\1", key)][value] = None
    for key, values in host_settings(hosts or {}).items():
        seen[key].update(dict.fromkeys(values))
    return {k: list(v) for k, v in seen.items()}, missing


def settings_differences(
    trials_a: list[TrialRecord],
    trials_b: list[TrialRecord],
    hosts_a: Mapping[str, Any] | None = None,
    hosts_b: Mapping[str, Any] | None = None,
) -> list[str]:
    """One line per network setting (trial ``params["net"]``, flattened) whose values differ between A and B.
    `hosts_a`, `hosts_b`: a --hosts run's provenance of its hosts (None or empty: a run on this machine).

    A key present on one side only counts as differing (shown as "–" on the other), unless only one side ran
    on --hosts: then only the settings both recorded are compared. If either side has trials without
    ``params["net"]`` (runs from before it was recorded), one line says so instead of guessing; settings
    recorded on both sides are still compared. A side on --hosts gets one line saying what is known of it.
    """
    sa, missing_a = _side_settings(trials_a, hosts_a)
    sb, missing_b = _side_settings(trials_b, hosts_b)
    lines: list[str] = []
    if missing_a or missing_b:
        which = " and ".join(side for side, gone in (("A", missing_a), ("B", missing_b)) if gone)
        lines.append(f"network settings were not recorded for (some) trials of {which}: they cannot be compared")
    on_hosts = [side for side, hosts in (("A", hosts_a), ("B", hosts_b)) if hosts]
    if on_hosts:
        lines.append(
            f"network settings of {' and '.join(on_hosts)} (--hosts): each host's kernel and the NIC carrying the "
            "underlay (MTU, driver, offloads) are compared, and any device tunbench made there; the sysctls of "
            "the hosts' own namespaces (congestion control, socket buffers, qdisc) were not recorded"
        )
    if not sa or not sb:
        return lines
    keys = set(sa) & set(sb) if len(on_hosts) == 1 else set(sa) | set(sb)
    for key in sorted(keys):
        va, vb = sa.get(key, [_NOT_SET]), sb.get(key, [_NOT_SET])
        if set(va) != set(vb):
            lines.append(f"settings differ: {key}: {', '.join(va)} (A) vs {', '.join(vb)} (B)")
    return lines
