"""The matrix of cases and the order trials run in (pure).

Trials are interleaved: every repetition visits every case once, in a freshly shuffled order (seeded), so
drift, heat and background noise spread over all tunnels instead of biasing the ones measured last.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel

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
        parts = [self.tunnel.label, self.profile.name]
        if self.workload != "iperf3":
            parts.append(self.workload)
        if self.workload in _CLIENT_SWEEPS:  # flows = the number of clients; direction = direction or variant
            parts += [f"{self.flows} clients", self.direction]
        elif self.direction != "-":
            parts += [self.direction, f"{self.flows} flow" + ("s" if self.flows > 1 else "")]
        return " · ".join(parts)


@dataclass(frozen=True)
class PlannedTrial:
    seq: int
    case: Case
    repetition: int


# workloads with a `clients` axis (tunbench.multi): a case per client count, stored in the `flows` field
_CLIENT_SWEEPS = ("clients", "storm")


def expand(
    tunnels: list[TunnelRef],
    profiles: list[Profile],
    flows: list[int],
    directions: list[str],
    kinds: Sequence[str] = ("iperf3",),
    options: Mapping[str, BaseModel] | None = None,
) -> list[Case]:
    """Profiles x workloads x tunnels x the workload's own axes (a latency probe has no flows/direction).
    A workload that cannot cross a tunnel's layer (UDP through a TCP port forward) skips that tunnel.

    A workload with a `clients` axis (tunbench.multi) sweeps its options' client counts instead of flows
    (the count goes in Case.flows), a `variant` axis its options' variants (in Case.direction); it skips
    tunnels whose adapter has no [multi] table (e.g. direct)."""
    from tunbench import workloads

    out: list[Case] = []
    for p in profiles:
        for kind in kinds:
            w = workloads.get(kind)
            fs = flows if "flows" in w.axes else [1]
            ds = directions if "direction" in w.axes else ["-"]
            if "clients" in w.axes:
                opts = _sweep_options(w.Options, (options or {}).get(kind))
                fs = list(getattr(opts, "clients", [1]))
                if "variant" in w.axes:
                    ds = list(getattr(opts, "variants", ["-"]))
            for t in tunnels:
                if t.adapter.spec.layer not in w.layers:
                    continue
                if "clients" in w.axes and t.adapter.spec.multi is None:
                    continue
                out.extend(Case(t, p, f, d, kind) for f in fs for d in ds)
    return out


def skipped(tunnels: list[TunnelRef], kinds: Sequence[str]) -> list[tuple[str, str, str]]:
    """The (tunnel label, workload, why) pairs `expand` leaves out, to tell the user instead of dropping
    them silently."""
    from tunbench import workloads

    out: list[tuple[str, str, str]] = []
    for kind in kinds:
        w = workloads.get(kind)
        for t in tunnels:
            if t.adapter.spec.layer not in w.layers:
                why = f"{kind} needs an L3 tunnel (an L4 proxy forwards TCP connections only: no UDP)"
                out.append((t.label, kind, why))
            elif "clients" in w.axes and t.adapter.spec.multi is None and t.name != "direct":
                # (the direct baseline has no many-client form: not worth a note in every such run)
                out.append((t.label, kind, "the adapter has no [multi] table (one server, many clients)"))
    return out


def _sweep_options(cls: type[BaseModel], given: BaseModel | None) -> BaseModel:
    return given if given is not None else cls()


def interleave(cases: list[Case], repeat: int, seed: int) -> list[PlannedTrial]:
    rng = random.Random(seed)
    out: list[PlannedTrial] = []
    for rep in range(1, repeat + 1):
        order = list(cases)
        rng.shuffle(order)
        out.extend(PlannedTrial(len(out) + 1, c, rep) for c in order)
    return out
