"""How a fleet's N clients are shared among the client hosts: in proportion to each host's
tunbench_client_weight (default 1, an even spread), by largest remainder, so the shares add up to N and
no host is off by more than one client from its exact share. Client indices are handed out in the
inventory's order: the first host takes clients 1..k1, the next k1+1..k1+k2, and so on."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tunbench.remote.inventory import Host


@dataclass(frozen=True)
class Share:
    """One client host's part of a fleet: clients `first`..`first + count - 1` (1-based)."""

    host: Host
    first: int
    count: int

    @property
    def indices(self) -> range:
        return range(self.first, self.first + self.count)


def shares(n: int, weights: Sequence[float]) -> list[int]:
    """`n` split in proportion to `weights` (each > 0) by largest remainder; ties go to the earlier host."""
    if not weights:
        raise ValueError("no client host")
    total = sum(weights)
    exact = [n * w / total for w in weights]
    counts = [math.floor(x) for x in exact]
    left = n - sum(counts)
    by_remainder = sorted(range(len(weights)), key=lambda k: (-(exact[k] - counts[k]), k))
    for k in by_remainder[:left]:
        counts[k] += 1
    return counts


def spread(n: int, hosts: Sequence[Host]) -> list[Share]:
    """The hosts' shares of `n` clients (hosts given none are left out)."""
    out: list[Share] = []
    first = 1
    for host, count in zip(hosts, shares(n, [h.client_weight for h in hosts]), strict=True):
        if count:
            out.append(Share(host, first, count))
            first += count
    return out
