"""The cores surface of a run (docs/scaling.md): for each tunnel and case, throughput at each value of the
cores axis, per core, against linear, the knee, the gain from the first cores value to the next with its
interval, and what saturated each side at each point. Pure: trials in, values out; the terminal and HTML
forms are in report/terminal.py and report/html/scaling.py.

Definitions (docs/scaling.md):
- efficiency at n cores: T(n) / (n x T(1)), T the median throughput (T(c1) x n / c1 when the axis does not
  start at 1);
- the knee: the first cores value after which the gain per added core, (T(b) - T(a)) / (b - a) between
  consecutive values a < b, falls below KNEE_SHARE of linear (of T(1) per core); None when no step does;
- the gain: T(b) / T(a) - 1 between the first two values, with the Hodges-Lehmann interval of the ratio of
  the two sets of repetitions (stats.summary.ratio_of_medians: its real coverage is reported; 3 vs 3
  repetitions can claim 90% at most).
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from tunbench.metrics import core
from tunbench.monitor.stage import BUSIEST_THREAD, THREAD_AND_CPU, UNCLAIMED
from tunbench.results import TrialRecord
from tunbench.stats.summary import Ratio, ratio_of_medians

KNEE_SHARE = 0.5
"""The share of linear (the first point's throughput per core) below which an added core's gain marks the knee."""

ROLES = ("client", "server")


@dataclass(frozen=True)
class Point:
    """One cores value of a curve: its median throughput over n ok repetitions, per core, against linear,
    each side's saturated stage as most of its repetitions named it (with how many did), each side's
    busiest tunnel thread (its name, the median of its % of one core) and, for a side pinned to one CPU, the
    median % of that CPU charged to no known process, which its thread is judged with (monitor/stage.py)."""

    cores: int
    n: int
    median_bps: float
    per_core_bps: float
    efficiency: float | None
    stages: dict[str, tuple[str, int]]
    busiest: dict[str, tuple[str, float]]
    unclaimed: dict[str, float] = field(default_factory=dict)

    def stage_text(self, role: str) -> str:
        """'thread socat', 'all cores busy (2/3)': the stage alone."""
        name, count = self.stages.get(role, ("–", 0))
        return name if count in (0, self.n) else f"{name} ({count}/{self.n})"

    def side_text(self, role: str) -> str:
        """The stage and, where it is not the thread itself, the busiest thread: 'all cores busy, socat 93%';
        a thread judged with its one CPU's unclaimed time gives both parts: 'thread socat 91% + 4% uncharged'."""
        text = self.stage_text(role)
        if (top := self.busiest.get(role)) is not None and not text.startswith("thread "):
            text += f", {top[0]} {top[1]:.0f}%"
        elif top is not None:
            text += f" {top[1]:.0f}%"
            if (unclaimed := self.unclaimed.get(role)) is not None:
                text += f" + {unclaimed:.0f}% uncharged"
        return text


@dataclass(frozen=True)
class Curve:
    """A tunnel's case (all but the cores) along the cores axis."""

    label: str
    profile: str
    workload: str
    flows: int
    direction: str
    points: tuple[Point, ...]
    knee: int | None
    gain: Ratio | None  # T(second) / T(first), from the two values' repetitions

    @property
    def title(self) -> str:
        flows = f"{self.flows} flow{'s' if self.flows != 1 else ''}"
        return " · ".join(p for p in (self.profile, self.direction if self.direction != "-" else "", flows) if p)

    @property
    def gain_span(self) -> str:
        """ "1→2", the two cores values the gain is between."""
        return f"{self.points[0].cores}→{self.points[1].cores}" if len(self.points) > 1 else ""


def knee(points: list[tuple[int, float]]) -> int | None:
    """The knee of (cores, throughput) points sorted by cores (module docstring); None when every step
    gains at least KNEE_SHARE of linear per added core, or with fewer than two points."""
    if len(points) < 2 or points[0][1] <= 0:
        return None
    linear = points[0][1] / points[0][0]
    for (a, ta), (b, tb) in itertools.pairwise(points):
        if (tb - ta) / (b - a) < KNEE_SHARE * linear:
            return a
    return None


def _busiest(trials: list[TrialRecord], role: str) -> tuple[str, float] | None:
    """The name most repetitions' busiest thread had, and the median of the busiest thread's %."""
    names = [
        str(tops[role][0][0]) for t in trials if isinstance(tops := t.params.get("threads"), dict) and tops.get(role)
    ]
    pcts = [v for t in trials if (v := t.metrics.get(BUSIEST_THREAD.key(role=role))) is not None]
    if not names or not pcts:
        return None
    return Counter(names).most_common(1)[0][0], float(np.median(pcts))


def _unclaimed(trials: list[TrialRecord], role: str) -> float | None:
    """The median % of a pinned side's one CPU charged to no known process, over the repetitions judged
    with it."""
    pcts = [
        v
        for t in trials
        if t.metrics.get(THREAD_AND_CPU.key(role=role)) is not None
        and (v := t.metrics.get(UNCLAIMED.key(role=role))) is not None
    ]
    return float(np.median(pcts)) if pcts else None


def _stage(trials: list[TrialRecord], role: str) -> tuple[str, int]:
    names = [str(st[role]) for t in trials if isinstance(st := t.params.get("stage"), dict) and role in st]
    if not names:
        return "–", 0
    (name, count), *_ = Counter(names).most_common(1)
    return name, count


def curves(trials: list[TrialRecord]) -> list[Curve]:
    """Every case with two or more cores values among the run's ok trials, as a curve: tunnels in the order
    they first ran, then by profile, direction and flows."""
    groups: dict[tuple[str, str, str, int, str], dict[int, list[TrialRecord]]] = defaultdict(lambda: defaultdict(list))
    for t in trials:
        if t.cores and t.status == "ok" and t.metrics.get(core.THROUGHPUT.name) is not None:
            groups[(t.label, t.profile, t.workload, t.flows, t.direction)][t.cores].append(t)
    out: list[Curve] = []
    for (label, profile, workload, flows, direction), by_cores in groups.items():
        if len(by_cores) < 2:
            continue
        values = {n: [float(t.metrics[core.THROUGHPUT.name] or 0.0) for t in ts] for n, ts in by_cores.items()}
        medians = sorted((n, float(np.median(v))) for n, v in values.items())
        first_n, first_t = medians[0]
        points = tuple(
            Point(
                n,
                len(values[n]),
                med,
                med / n,
                med / (n * first_t / first_n) if first_t > 0 else None,
                {role: _stage(by_cores[n], role) for role in ROLES},
                {role: top for role in ROLES if (top := _busiest(by_cores[n], role)) is not None},
                {role: u for role in ROLES if (u := _unclaimed(by_cores[n], role)) is not None},
            )
            for n, med in medians
        )
        a, b = medians[0][0], medians[1][0]
        gain = ratio_of_medians(values[b], values[a]) if all(v > 0 for v in values[a] + values[b]) else None
        out.append(Curve(label, profile, workload, flows, direction, points, knee(medians), gain))
    order = {label: i for i, label in enumerate(dict.fromkeys(t.label for t in sorted(trials, key=lambda t: t.seq)))}
    return sorted(out, key=lambda c: (order.get(c.label, 0), c.profile, c.workload, c.direction, c.flows))


def knee_text(c: Curve) -> str:
    """'1' or 'none up to 2'."""
    return str(c.knee) if c.knee is not None else f"none up to {c.points[-1].cores}"


def gain_text(c: Curve) -> str:
    """'+4.1% [-2.0, +9.9] 90%': the gain between the first two cores values, its interval and coverage."""
    g = c.gain
    if g is None or not np.isfinite(g.value):
        return "–"
    point = f"{100 * (g.value - 1):+.1f}%"
    if not (np.isfinite(g.ci_low) and np.isfinite(g.ci_high)):
        return point
    return f"{point} [{100 * (g.ci_low - 1):+.1f}, {100 * (g.ci_high - 1):+.1f}] {g.ci_coverage:.0%}"


def gbit(bps: float) -> str:
    return f"{bps / 1e9:.3g}"


def stage_cell(p: Point) -> str:
    """'client: thread socat 98% · server: none, socat 20%'."""
    return " · ".join(f"{role}: {p.side_text(role)}" for role in ROLES)


def caption_lines() -> list[str]:
    """What the surface's columns mean, under its tables."""
    return [
        "cores: CPUs each side was placed on (docs/scaling.md) · per core: Gbit/s ÷ cores · ×linear: "
        f"T(n) / (n × T(1)) · knee: the cores value after which an added core gains less than "
        f"{KNEE_SHARE:.0%} of linear · gain: T(2)/T(1) - 1, Hodges-Lehmann interval and its coverage",
        "client, server: what saturated the side: on one CPU a tunnel thread plus that CPU's time charged to "
        "no known process at ≥95% of it, else all cores busy (its CPUs ≥95% busy), else a tunnel thread at "
        "≥95% of a core, else a CPU's softirqs at ≥95%, else none (most repetitions' answer; k/n when they "
        "differ); then the side's busiest tunnel thread and its % of one core (median), + the % of its one "
        "CPU charged to no known process (uncharged) where it had one",
    ]
