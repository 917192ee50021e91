"""The matrix of cases and the order trials run in (pure).

Trials are interleaved: every repetition visits every case once, in a freshly shuffled order (seeded), so
drift, heat and background noise spread over all tunnels instead of biasing the ones measured last.
"""

from __future__ import annotations

import random
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


def expand(tunnels: list[TunnelRef], profiles: list[Profile], flows: list[int], directions: list[str]) -> list[Case]:
    return [Case(t, p, f, d) for p in profiles for t in tunnels for f in flows for d in directions]


def interleave(cases: list[Case], repeat: int, seed: int) -> list[PlannedTrial]:
    rng = random.Random(seed)
    out: list[PlannedTrial] = []
    for rep in range(1, repeat + 1):
        order = list(cases)
        rng.shuffle(order)
        out.extend(PlannedTrial(len(out) + 1, c, rep) for c in order)
    return out
