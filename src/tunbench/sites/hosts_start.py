"""Starting a fleet's clients on the client hosts at one instant (sites/hosts_fleet.py): each host's clients
launched in one request to its agent, at an instant agreed on this machine's clock and mapped onto each
host's through its measured clock offset; and whether the clocks are known well enough for that."""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from tunbench.errors import ConfigError
from tunbench.host.place import Spawn, Started
from tunbench.remote.clock import ClockOffset
from tunbench.remote.inventory import Host
from tunbench.remote.place import RemotePlace
from tunbench.remote.protocol import HostLost
from tunbench.remote.topology import HostRun


class HostsFleetPlaces:
    """The server's place, and client i's place on its client host; each host's clients launch in one
    request (fleet.FleetPlaces)."""

    batched = True

    def __init__(self, server: RemotePlace, clients: list[RemotePlace], start_wait_s: float = 120.0) -> None:
        self.server = server
        self._clients = clients
        self.start_wait_s = start_wait_s
        self.skew: dict[str, float] = {}  # per host: its first launch - the agreed instant (this machine's clock)

    def client(self, i: int) -> RemotePlace:
        return self._clients[i - 1]

    def spawn_batch(self, spawns: dict[int, Spawn], start_at: float | None) -> dict[int, Started]:
        by_host: dict[str, list[int]] = {}
        for i, sp in spawns.items():
            by_host.setdefault(sp.place.machine, []).append(i)

        def one(indices: list[int]) -> list[Started]:
            wait = self.start_wait_s + 0.05 * len(indices) + max(0.0, (start_at or 0.0) - time.monotonic())
            places = [self.client(i) for i in indices]
            try:
                return places[0].spawn_many([spawns[i] for i in indices], places, start_at, wait_s=wait)
            except HostLost as e:  # that host's clients are lost with it; the other hosts' go on
                at = start_at if start_at is not None else time.monotonic()
                return [Started(None, at, str(e)) for _ in indices]

        out: dict[int, Started] = {}
        with ThreadPoolExecutor(max(1, len(by_host))) as pool:
            for (host, indices), got in zip(by_host.items(), pool.map(one, by_host.values()), strict=True):
                out.update(zip(indices, got, strict=True))
                if start_at is not None and (spawned := [r for r in got if r.proc is not None]):
                    self.skew[host] = min(r.at for r in spawned) - start_at
        return out


def clock_uncertainty_s(host_run: HostRun, hosts: Sequence[Host]) -> float:
    """How well two client hosts' starts can be compared: the two largest clock offset uncertainties added
    (each host's offset to this machine is known to ± half its best round trip); one host: its own."""
    unc = sorted((c.clock.uncertainty_s for h in hosts if (c := host_run.conn_of(h)).clock), reverse=True)
    return sum(unc[:2])


def check_clocks(
    host_run: HostRun, hosts: Sequence[Host], tolerance_s: float, *, measure: bool = False, source: str = ""
) -> list[ClockOffset]:
    """The client hosts' clock offsets (measured again with `measure`); a ConfigError with each host's
    uncertainty when two hosts' starts could not be agreed to within `tolerance_s`."""
    conns = [host_run.conn_of(h) for h in hosts]
    if measure:
        with ThreadPoolExecutor(max(1, len(conns))) as pool:
            list(pool.map(lambda c: c.measure_clock(), conns))
    clocks = [c.clock for c in conns if c.clock is not None]
    unc = clock_uncertainty_s(host_run, hosts)
    if unc > tolerance_s:
        each = ", ".join(f"{c.name} ± {1e3 * c.clock.uncertainty_s:.2f} ms" for c in conns if c.clock)
        raise ConfigError(
            f"the client hosts' clocks are known to ± {1e3 * unc:.2f} ms of each other ({each}: half the best "
            f"round trip to each), more than the storm's start_tolerance_s of {1e3 * tolerance_s:.2f} ms: a start "
            "agreed to that precision cannot be kept. Raise start_tolerance_s, or bring the hosts closer",
            source=source,
            key="workload.storm.start_tolerance_s",
        )
    return clocks
