"""The matrix of cases and the order trials run in (pure).

Trials are interleaved: every repetition visits every case once, in a freshly shuffled order (seeded), so
drift, heat and background noise spread over all tunnels instead of biasing the ones measured last.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from tunbench.link.profile import Profile
from tunbench.tunnels.registry import TunnelRef


@dataclass(frozen=True)
class Case:
    tunnel: TunnelRef
    profile: Profile
    flows: int
    direction: str
    workload: str = "iperf3"

    @property
    def title(self) -> str:
        return f"{self.tunnel.label} · {self.profile.name} · {self.direction} · {self.flows} flow" + (
            "s" if self.flows > 1 else ""
        )


@dataclass(frozen=True)
class PlannedTrial:
    seq: int
    case: Case
    repetition: int


def expand(
    tunnels: list[TunnelRef],
    profiles: list[Profile],
    flows: list[int],
    directions: list[str],
    kinds: Sequence[str] = ("iperf3",),
) -> list[Case]:
    """Profiles x workloads x tunnels x the workload's own axes (a latency probe has no flows/direction).
    A workload that cannot cross a tunnel's layer (UDP through a TCP port forward) skips that tunnel."""
    from tunbench import workloads

    out: list[Case] = []
    for p in profiles:
        for kind in kinds:
            w = workloads.get(kind)
            fs = flows if "flows" in w.axes else [1]
            ds = directions if "direction" in w.axes else ["-"]
            for t in tunnels:
                if t.adapter.spec.layer not in w.layers:
                    continue
                out.extend(Case(t, p, f, d, kind) for f in fs for d in ds)
    return out


def interleave(cases: list[Case], repeat: int, seed: int) -> list[PlannedTrial]:
    rng = random.Random(seed)
    out: list[PlannedTrial] = []
    for rep in range(1, repeat + 1):
        order = list(cases)
        rng.shuffle(order)
        out.extend(PlannedTrial(len(out) + 1, c, rep) for c in order)
    return out
