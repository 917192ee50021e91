"""What else ran during a run's measured windows, in one line: the foreign CPU, tunbench's own CPU (the
harness), other tunbench runs and how many trials were interfered with (monitor/interference.py). The
terminal, the HTML report and the JSON export all take it from here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tunbench.monitor.interference import FOREIGN_CPU, HARNESS_CPU, INTERFERED
from tunbench.results import TrialRecord


def figures(trials: Sequence[TrialRecord]) -> dict[str, Any] | None:
    """Median and max of foreign and harness CPU (% of one core) over the trials that recorded them, the
    other runs seen, and the interfered trials' count; None when no trial recorded them (older runs)."""
    seen = [t for t in trials if t.metrics.get(FOREIGN_CPU.name) is not None]
    if not seen:
        return None

    def spread(key: str) -> dict[str, float | None]:
        xs = np.array([float(v) for t in seen if (v := t.metrics.get(key)) is not None])
        if not xs.size:
            return {"median": None, "max": None}
        return {"median": float(np.median(xs)), "max": float(xs.max())}

    runs = sorted({r for t in seen for r in (t.params.get("interference_detail") or {}).get("runs", [])})
    return {
        "trials": len(seen),
        "interfered": sum(1 for t in seen if t.metrics.get(INTERFERED.name) == 1.0),
        "foreign_cpu_pct": spread(FOREIGN_CPU.name),
        "harness_cpu_pct": spread(HARNESS_CPU.name),
        "other_runs": runs,
    }


def line(trials: Sequence[TrialRecord]) -> str | None:
    """ "during the windows: foreign CPU 0.8% of a core (max 2.1%) · tunbench 0.2% (max 0.4%) · no other run ·
    0 of 6 trials interfered" (plain text), or None."""
    fig = figures(trials)
    if fig is None:
        return None

    def pct(d: dict[str, float | None]) -> str:
        if d["median"] is None or d["max"] is None:
            return "not read"
        return f"{d['median']:.1f}% of a core (max {d['max']:.1f}%)"

    runs = fig["other_runs"]
    return (
        f"during the windows: foreign CPU {pct(fig['foreign_cpu_pct'])} · tunbench itself "
        f"{pct(fig['harness_cpu_pct'])} · "
        + (f"other tunbench runs: {', '.join(runs)}" if runs else "no other tunbench run")
        + f" · {fig['interfered']} of {fig['trials']} trial(s) interfered with"
    )
