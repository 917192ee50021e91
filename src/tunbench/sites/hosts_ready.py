"""Readiness through a fleet's tunnels between hosts (sites/hosts_fleet.py): host/ready.py's probe run by
each client host's agent for its own clients, its answers mapped onto this machine's clock, and one probe
for the whole fleet over them."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from tunbench.remote.connection import AgentConnection
from tunbench.remote.protocol import HostLost


class RemoteReadyProbe:
    """tunnels' readiness probe (host/ready.py) run by a client host's agent for its clients (keyed by their
    fleet index); `ready_at` on this machine's monotonic clock."""

    def __init__(self, conn: AgentConnection, namespaces: dict[int, str], address: str, interval_s: float) -> None:
        self._conn = conn
        self._key = str(conn.call("probe_open", namespaces=namespaces, address=address, interval_s=interval_s))
        self.ready_at: dict[int, float] = {}

    def watch(self, keys: Iterable[int]) -> None:
        keys = list(keys)
        for k in keys:
            self.ready_at.pop(k, None)
        self._conn.call("probe_watch", probe=self._key, keys=keys)

    def wait(self, keys: Iterable[int], deadline: float) -> bool:
        keys = list(keys)
        timeout = max(0.0, deadline - time.monotonic())
        got = self._conn.call("probe_wait", wait_s=timeout + 30.0, probe=self._key, keys=keys, timeout_s=timeout)
        assert self._conn.clock is not None
        self.ready_at.update({int(k): self._conn.clock.to_local_mono(float(t)) for k, t in got.items()})
        return set(keys) <= self.ready_at.keys()

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a lost host closed it on its own
            self._conn.call("probe_close", probe=self._key)


class HostsReadyProbe:
    """One RemoteReadyProbe per client host, answering for the whole fleet as the local probe does."""

    def __init__(self, probes: dict[str, tuple[RemoteReadyProbe, set[int]]]) -> None:
        self._probes = probes

    @property
    def ready_at(self) -> dict[int, float]:
        return {k: t for probe, _ in self._probes.values() for k, t in probe.ready_at.items()}

    def _split(self, keys: Iterable[int]) -> list[tuple[RemoteReadyProbe, list[int]]]:
        keys = set(keys)
        return [(probe, sorted(mine & keys)) for probe, mine in self._probes.values() if mine & keys]

    def watch(self, keys: Iterable[int]) -> None:
        for probe, mine in self._split(keys):
            with contextlib.suppress(HostLost):  # a lost host's clients are never ready (the fleet says why)
                probe.watch(mine)

    def wait(self, keys: Iterable[int], deadline: float) -> bool:
        """Every host waited for on its own thread (each agent answers for its clients); a lost host's
        clients are not ready."""

        def one(probe: RemoteReadyProbe, mine: list[int]) -> bool:
            try:
                return probe.wait(mine, deadline)
            except HostLost:
                return False

        parts = self._split(keys)
        with ThreadPoolExecutor(max(1, len(parts))) as pool:
            return all(pool.map(lambda pm: one(*pm), parts))

    def close(self) -> None:
        for probe, _ in self._probes.values():
            probe.close()
