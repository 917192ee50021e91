"""LinkEmulator: starts tunbench-link between the two namespaces, waits for its ready line, assigns the
addresses, and on exit stops it and keeps its final counters (loss the model made, queue drops, and the
emulator's own drops, reported separately)."""

from __future__ import annotations

import json
import os
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from tunbench.errors import TunnelError
from tunbench.host.ledger import Ledger
from tunbench.host.proc import Daemon
from tunbench.link.binary import find_link_binary
from tunbench.link.profile import Profile
from tunbench.metrics import link
from tunbench.topology.addresses import AddressPlan
from tunbench.topology.build import LinkBuilder, Topology
from tunbench.topology.veth import Endpoint, configure


@dataclass(frozen=True)
class LinkEnd:
    """One side of the emulated link: the TUN device tunbench-link opens inside a namespace."""

    netns: str
    dev: str


class LinkEmulator:
    """`with LinkEmulator(...)`: tunbench-link forwards between `a` (the client side: the profile's "up"
    direction leaves it) and `b` (the server side); `configure` runs once both TUN devices exist."""

    def __init__(
        self,
        profile: Profile,
        ledger: Ledger,
        workdir: Path,
        seed: int,
        *,
        a: LinkEnd,
        b: LinkEnd,
        mtu: int,
        configure: Callable[[], None],
        stats_name: str = "link-stats.json",
        plan: AddressPlan | None = None,
    ) -> None:
        self.profile = profile
        self.ledger = ledger
        self.workdir = workdir
        self.seed = seed
        self.a = a
        self.b = b
        self.mtu = mtu
        self._configure = configure
        self.stats_path = workdir / stats_name
        self.plan = plan  # the client's addresses a rebind rewrites (the pair's by default)
        self.stats: dict[str, Any] = {}
        self.daemon: Daemon | None = None
        self.schedule_started = False

    def devices(self) -> dict[str, str]:
        """namespace name -> this link's TUN device in it (topology.build.EmulatedLink)."""
        return {self.a.netns: self.a.dev, self.b.netns: self.b.dev}

    def argv(self) -> list[str]:
        return [
            str(find_link_binary()),
            "run",
            "--netns-a",
            f"/run/netns/{self.a.netns}",
            "--dev-a",
            self.a.dev,
            "--netns-b",
            f"/run/netns/{self.b.netns}",
            "--dev-b",
            self.b.dev,
            "--mtu",
            str(self.mtu),
            "--seed",
            str(self.seed),
            "--stats-file",
            str(self.stats_path),
            *self.profile.link_args(self.plan),
            *(["--events-start", "signal"] if self.profile.timed() else []),
        ]

    def start_schedule(self) -> None:
        """Start the profile's events and traces now (SIGUSR1 to the emulator this object started; once, and
        only when the profile has some: without `--events-start signal` the signal would end the emulator)."""
        if self.profile.timed() and not self.schedule_started and self.daemon is not None and self.daemon.alive():
            self.daemon.signal(signal.SIGUSR1)
            self.schedule_started = True

    @property
    def pid(self) -> int | None:
        return self.daemon.pid if self.daemon else None

    def __enter__(self) -> LinkEmulator:
        self.daemon = Daemon(
            self.argv(), ledger=self.ledger, log_path=self.workdir / "link.log", what="tunbench-link", stdout_pipe=True
        )
        try:
            self._wait_ready(timeout_s=10.0)
            self._configure()
        except BaseException:
            self._stop()
            raise
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        assert self.daemon is not None and self.daemon.proc.stdout is not None
        out = self.daemon.proc.stdout
        deadline = time.monotonic() + timeout_s
        buf = b""
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TunnelError(f"tunbench-link not ready after {timeout_s:g} s: {self.daemon.log_tail(10)}")
            ready, _, _ = select.select([out], [], [], min(left, 0.2))
            if ready:
                chunk = os.read(out.fileno(), 4096)
                if not chunk:
                    self.daemon.proc.wait(timeout=2)
                    raise TunnelError(
                        f"tunbench-link exited ({self.daemon.proc.returncode}): {self.daemon.log_tail(10)}"
                    )
                buf += chunk
        line = buf.split(b"\n", 1)[0]
        try:
            event = json.loads(line)
        except json.JSONDecodeError as e:
            raise TunnelError(f"tunbench-link printed {line[:200]!r} instead of its ready line") from e
        if event.get("event") != "ready":
            raise TunnelError(f"tunbench-link: unexpected first event {event}")

    def _stop(self) -> None:
        if self.daemon is not None:
            self.daemon.stop()
            try:
                self.stats = json.loads(self.stats_path.read_text())
            except (OSError, ValueError):
                self.stats = {}

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._stop()


def link_metrics(stats: dict[str, Any] | None) -> dict[str, float]:
    """The emulator's final counters as trial metrics (`link.up.*` client->server, `link.down.*`): what its
    models dropped and what it dropped itself, kept apart. Numbers only: a direction's `occupancy` record
    is a series (queue_series)."""
    out: dict[str, float] = {}
    schedule = (stats or {}).get("schedule") or {}
    for wire, direction in (("a2b", "up"), ("b2a", "down")):
        for key, value in ((stats or {}).get(wire) or {}).items():
            if isinstance(value, int | float):
                out[link.LINK_COUNTER.key(direction=direction, counter=key)] = float(value)
        spec = ((stats or {}).get("specs") or {}).get(wire) or {}
        if spec:  # whether this direction had a bottleneck (a rate or a trace) whose queue it measured
            out[link.BOTTLENECK.key(direction=direction)] = 1.0 if spec.get("rate_bps") or spec.get("trace") else 0.0
        if applied := schedule.get(wire):  # the profile's events, as the emulator applied them
            out[link.EVENTS_APPLIED.key(direction=direction)] = float(len(applied))
            out[link.EVENT_LATE_MAX.key(direction=direction)] = max(float(e.get("late_ns", 0)) for e in applied) / 1e3
    return out


QUEUE_SERIES = "queue_bytes"  # the trial series of the bottleneck queue's occupancy: queue_bytes.up, .down


def queue_series(
    stats: dict[str, Any] | None, t0_ns: int, t1_ns: int
) -> tuple[dict[str, list[tuple[float, float]]], dict[str, float]]:
    """The emulator's bottleneck queue occupancy over the measured window, as trial series.

    Each direction with a bottleneck queue has `occupancy` in the stats file: the most bytes waiting in it
    during each window of `every_ns`, window i starting at `start_ns + i * every_ns` (CLOCK_MONOTONIC, the
    clock of Python's time.monotonic()). `t0_ns` and `t1_ns` are the measured window on that clock. Kept:
    the windows wholly inside it, each at its end in seconds since `t0_ns` (as iperf3's per-second points
    stand at the end of their second), as `queue_bytes.up` (a2b) and `queue_bytes.down` (b2a). Also
    `link.<dir>.queue_series_truncated` = 1 where the emulator stopped recording (`truncated`) before the
    measured window ended, so that the series stops short of it."""
    series: dict[str, list[tuple[float, float]]] = {}
    flags: dict[str, float] = {}
    for wire, direction in (("a2b", "up"), ("b2a", "down")):
        occ = ((stats or {}).get(wire) or {}).get("occupancy")
        if not isinstance(occ, dict):
            continue
        start, every, values = occ.get("start_ns"), occ.get("every_ns"), occ.get("bytes")
        if not isinstance(start, int) or not isinstance(every, int) or every <= 0 or not isinstance(values, list):
            continue
        first = max(0, -((start - t0_ns) // every))  # the first window that starts at or after t0
        end = min(len(values), (t1_ns - start) // every)  # past the last window that ends by t1
        pts = [
            ((start + (i + 1) * every - t0_ns) / 1e9, float(values[i]))
            for i in range(first, end)
            if isinstance(values[i], int | float) and not isinstance(values[i], bool)
        ]
        if pts:
            series[f"{QUEUE_SERIES}.{direction}"] = pts
        if occ.get("truncated") and start + len(values) * every < t1_ns:
            flags[link.QUEUE_TRUNCATED.key(direction=direction)] = 1.0
    return series, flags


def topology_emulator(topo: Topology, profile: Profile, ledger: Ledger, workdir: Path, seed: int) -> LinkEmulator:
    """The emulator in place of the veth of a two-namespace Topology: same addresses on both sides."""
    a = LinkEnd(topo.client.name, topo.ifname("lc"))
    b = LinkEnd(topo.server.name, topo.ifname("ls"))
    plan, mtu, v6 = topo.addr, topo.spec.mtu, topo.spec.ipv6

    def configure_ends() -> None:
        configure(
            Endpoint(topo.client, a.dev, plan.client, plan.prefixlen, plan.client6 if v6 else None, plan.prefixlen6),
            mtu,
        )
        configure(
            Endpoint(topo.server, b.dev, plan.server, plan.prefixlen, plan.server6 if v6 else None, plan.prefixlen6),
            mtu,
        )

    return LinkEmulator(profile, ledger, workdir, seed, a=a, b=b, mtu=mtu, configure=configure_ends, plan=plan)


def profile_link_builder(profile: Profile, ledger: Ledger, workdir: Path, seed: int) -> LinkBuilder | None:
    """A Topology link builder for the profile: the emulator, or None (plain veth) for `lan`."""
    if not profile.emulated:
        return None

    def build(topo: Topology) -> LinkEmulator:
        emu = topology_emulator(topo, profile, ledger, workdir, seed)
        topo.link = emu
        return emu

    return build
