"""The network settings (a trial's ``params["net"]``) that differ between A and B, one line each (pure)."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from tunbench.results import TrialRecord

_NOT_SET = "–"


_RUN_PREFIX = re.compile(r"\btb[0-9a-f]{6}(?=-)")
"""Interface names carry the run's prefix (tb + 6 hex digits): one key per interface across runs."""


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


def _side_settings(trials: list[TrialRecord]) -> tuple[dict[str, list[str]], bool]:
    """Values seen per flattened ``params["net"]`` key (in trial order, unique), and whether any trial lacks it."""
    seen: dict[str, dict[str, None]] = defaultdict(dict)
    missing = False
    for t in trials:
        net = t.params.get("net") if isinstance(t.params, dict) else None
        if not isinstance(net, dict) or not net:
            missing = True
            continue
        for key, value in flatten(net).items():
            seen[_RUN_PREFIX.sub("<run>", key)][value] = None
    return {k: list(v) for k, v in seen.items()}, missing


def settings_differences(trials_a: list[TrialRecord], trials_b: list[TrialRecord]) -> list[str]:
    """One line per network setting (trial ``params["net"]``, flattened) whose values differ between A and B.

    A key present on one side only counts as differing (shown as "–" on the other). If either side has
    trials without ``params["net"]`` (runs from before it was recorded), one line says so instead of
    guessing; settings recorded on both sides are still compared.
    """
    sa, missing_a = _side_settings(trials_a)
    sb, missing_b = _side_settings(trials_b)
    lines: list[str] = []
    if missing_a or missing_b:
        which = " and ".join(side for side, gone in (("A", missing_a), ("B", missing_b)) if gone)
        lines.append(f"network settings were not recorded for (some) trials of {which}: they cannot be compared")
    if not sa or not sb:
        return lines
    for key in sorted(set(sa) | set(sb)):
        va, vb = sa.get(key, [_NOT_SET]), sb.get(key, [_NOT_SET])
        if set(va) != set(vb):
            lines.append(f"settings differ: {key}: {', '.join(va)} (A) vs {', '.join(vb)} (B)")
    return lines
