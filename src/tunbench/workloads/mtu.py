"""The MTU cliff (`mtu`): UDP payload sizes swept across the tunnel's MTU and the underlay's, Don't Fragment
set, to find the size where delivery falls off, and how far.

It measures client -> server (`up`): iperf3 sets DF on its client's socket only, and a reverse test's server
sends without it (measured: its datagrams were fragmented and all arrived), so `down` is refused while
`dont_fragment` is set. Each step sends a fixed packet rate of one payload size for a second (iperf3 -u -l
SIZE --dont-fragment) and reads the packets/s that arrived. The sweep goes up in even steps; the first size
whose delivered rate falls below (1 - `drop`) of the size before it is the cliff, and a bisection between the
two finds it to the byte. With DF set, a datagram too big for the sender's route is refused by its kernel
(EMSGSIZE) and one too big for a hop further on is dropped there, so the cliff is the path's MTU minus the IP
and UDP headers (28 bytes over IPv4, 48 over IPv6). With `dont_fragment = false` the kernel fragments
instead, and the cliff, if any, is what fragmenting costs at the offered rate.

The known answer: the sender's route to the target goes through the tunnel's device, whose MTU the adapter
sets (its `mtu` parameter); the workload reads that MTU (`ip route get`, `ip link show`) and records how far
the cliff it found lands from it. The pure parts (the cliff, the bisection, the expected payload, the
parsers) are tested without a network; HEADERS states the outer header sizes assumed per tunnel.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tunbench.errors import CommandFailed, TrialError
from tunbench.metrics import declare
from tunbench.results import TrialRecord
from tunbench.units import Window
from tunbench.workloads.base import TRIAL_SETUP_S, CaseAxes, Column, Context, Measurement, Workload
from tunbench.workloads.udp import delivered_pps, run_udp

INNER_HEADERS = {"ipv4": 28, "ipv6": 48}
"""Bytes of IP and UDP header around a UDP payload inside the tunnel: 20 + 8 over IPv4, 40 + 8 over IPv6."""

HEADERS: dict[str, dict[str, int]] = {
    "direct": {"ipv4": 0, "ipv6": 0},
    # outer IP + UDP 8 + WireGuard's 16-byte data header and 16-byte Poly1305 tag
    "wireguard-go": {"ipv4": 60, "ipv6": 80},
    "wireguard-kernel": {"ipv4": 60, "ipv6": 80},
    "boringtun": {"ipv4": 60, "ipv6": 80},
    "gre": {"ipv4": 24, "ipv6": 44},  # outer IP + the 4-byte GRE header
    "ipip": {"ipv4": 20, "ipv6": 40},  # outer IP alone
    "vxlan": {"ipv4": 50, "ipv6": 70},  # outer IP + UDP 8 + VXLAN 8 + the inner Ethernet header 14
}
"""The outer headers each tunnel adds to an inner packet, in bytes, by underlay family (docs/workloads-packets.md):
an inner packet of the tunnel's MTU plus these must fit the underlay's MTU. Tunnels whose overhead depends on
their cipher or framing (OpenVPN, IPsec, fastd) or that carry a byte stream (the TCP forwards) are not listed."""

REFUSED = "unable to write to stream socket"
"""iperf3's words when its sender's kernel refuses a datagram (EMSGSIZE, "Message too long")."""

MTU_MAX_PAYLOAD = declare(
    "mtu.max_payload_bytes", "bytes", "none", "info",
    "The MTU cliff: the largest UDP payload delivered before the cliff (to the byte, when refined).",
)  # fmt: skip
MTU_CLIFF = declare("mtu.cliff_bytes", "bytes", "none", "info", "The MTU cliff: the first payload size past it.")
MTU_DEPTH = declare(
    "mtu.cliff_depth", "ratio", "none", "info",
    "The MTU cliff's depth: 1 - packets/s delivered past it / packets/s delivered before it (1: nothing passed).",
)  # fmt: skip
MTU_FOUND = declare("mtu.cliff_found", "flag", "none", "info", "The MTU cliff: 1 when the sweep found one.")
MTU_PATH = declare(
    "mtu.path_mtu_bytes", "bytes", "none", "info",
    "The MTU cliff: the largest payload delivered plus the inner IP and UDP headers (the path MTU it implies).",
)  # fmt: skip
MTU_ROUTE = declare(
    "mtu.route_mtu_bytes", "bytes", "none", "info",
    "The MTU of the device the client's route to the target goes through (the tunnel's, as its adapter set it).",
)  # fmt: skip
MTU_EXPECTED = declare(
    "mtu.expected_payload_bytes", "bytes", "none", "info",
    "The largest payload the route's MTU allows: route MTU - inner IP and UDP headers (the known answer).",
)  # fmt: skip
MTU_ERROR = declare(
    "mtu.cliff_error_bytes", "bytes", "none", "info",
    "The largest payload delivered minus the expected one (0: the cliff lands on the configured MTU).",
)  # fmt: skip
MTU_STEPS = declare("mtu.steps", "count", "none", "info", "The MTU cliff: steps the sweep and its bisection took.")


@dataclass(frozen=True)
class SizePoint:
    """One step of the sweep: a payload size and the packets/s delivered of those offered."""

    size: int
    delivered_pps: float
    note: str = ""  # why nothing arrived, where the sender said (EMSGSIZE: REFUSED)


@dataclass(frozen=True)
class Cliff:
    """Where delivery fell off: the last size delivered, the first one past the cliff, and its depth."""

    last_good: int
    first_bad: int
    depth: float  # 1 - delivered past it / delivered before it


def find_cliff(points: Sequence[SizePoint], drop: float) -> Cliff | None:
    """The first size (ascending) whose delivered packets/s fell below (1 - drop) of the size before it; None
    when delivery held all the way (or never started)."""
    pts = sorted(points, key=lambda p: p.size)
    for before, after in itertools.pairwise(pts):
        if before.delivered_pps > 0 and after.delivered_pps < (1.0 - drop) * before.delivered_pps:
            return Cliff(before.size, after.size, 1.0 - after.delivered_pps / before.delivered_pps)
    return None


def refine(cliff: Cliff, passes: Callable[[int], bool]) -> tuple[int, int]:
    """Bisect between the last size delivered and the first past the cliff, to the byte: (last good, first
    bad). `passes(size)` is one step's verdict; sizes are probed at most once each."""
    good, bad = cliff.last_good, cliff.first_bad
    while bad - good > 1:
        mid = (good + bad) // 2
        if passes(mid):
            good = mid
        else:
            bad = mid
    return good, bad


def sweep_sizes(start: int, stop: int, step: int) -> list[int]:
    """The sweep's payload sizes: start, start + step, ... up to stop (stop itself always included)."""
    sizes = list(range(start, stop, step))
    return [*sizes, stop]


def expected_payload(route_mtu: int, family: str) -> int:
    """The largest UDP payload a route of this MTU carries unfragmented (the cliff's known answer)."""
    return route_mtu - INNER_HEADERS[family]


def route_device(text: str) -> str | None:
    """The device of `ip route get ADDR`'s answer ("198.18.1.2 dev tb-wg0 src ... uid 0")."""
    m = re.search(r"\bdev (\S+)", text)
    return m.group(1) if m else None


def link_mtu(text: str) -> int | None:
    """The MTU in `ip -o link show dev DEV`'s answer ("5: tb-wg0: <POINTOPOINT,...> mtu 1420 qdisc ...")."""
    m = re.search(r"\bmtu (\d+)", text)
    return int(m.group(1)) if m else None


class MtuOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    start: int = Field(default=1200, ge=16, le=65507, description="the smallest UDP payload swept, bytes")
    stop: int = Field(default=1520, ge=16, le=65507, description="the largest, bytes")
    step: int = Field(default=32, ge=1, le=9000, description="bytes between sizes of the sweep")
    pps: float = Field(default=2000.0, gt=0, le=1_000_000, description="packets/s offered at each size")
    step_s: int = Field(default=1, ge=1, le=60, description="seconds per size (iperf3 counts whole seconds)")
    drop: float = Field(default=0.5, gt=0, le=1, description="a fall of this share of packets/s is a cliff")
    dont_fragment: bool = Field(default=True, description="set IPv4 DF (iperf3 --dont-fragment)")
    refine: bool = Field(default=True, description="bisect the cliff to the byte")
    socket_buffer: str = Field(default="2M", pattern=r"^([0-9]+[KMG]?)?$", description="iperf3 -w ('' = default)")

    @model_validator(mode="after")
    def _ordered(self) -> MtuOptions:
        if self.stop <= self.start:
            raise ValueError("stop must be larger than start")
        return self


def _probes(o: MtuOptions) -> int:
    """The most probes a trial sends: the sweep's sizes, and the bisection's within one step."""
    return len(sweep_sizes(o.start, o.stop, o.step)) + (max(1, o.step).bit_length() if o.refine else 0)


class MtuWorkload(Workload[Context, MtuOptions]):
    kind = "mtu"
    description = (
        "the MTU cliff: UDP payloads swept with DF set across the tunnel's and the underlay's MTU; where "
        "delivery falls off and how far, against the route's MTU"
    )
    axes = ("direction",)
    layers = ("l3",)
    Options = MtuOptions
    one_way = True
    columns = (
        Column("max payload B", MTU_MAX_PAYLOAD.name, "n"),
        Column("path MTU", MTU_PATH.name, "n"),
        Column("route MTU", MTU_ROUTE.name, "n"),
        Column("off by B", MTU_ERROR.name, "n"),
        Column("depth", MTU_DEPTH.name, "frac"),
    )
    caption = (
        "MTU cliff: the largest UDP payload delivered with DF set, the path MTU it implies, the MTU of the "
        "sender's route (the tunnel's), how far the cliff lands from it, and how much delivery fell past it"
    )

    def headline(self, rec: TrialRecord) -> str:
        m = rec.metrics
        if not m.get(MTU_FOUND.name):
            return "no cliff in the sweep"
        return f"cliff after {m.get(MTU_MAX_PAYLOAD.name):.0f} B (path MTU {m.get(MTU_PATH.name):.0f})"

    def measure(self, ctx: Context) -> Measurement:
        opts = self.opts(ctx.options)
        if opts.dont_fragment and ctx.direction == "down":
            # measured: with -R the server's datagrams went out without DF and were fragmented, no cliff
            raise TrialError(
                "mtu: iperf3 sets Don't Fragment on the client's socket only (--dont-fragment does not reach "
                "the sender of a reverse test): measure the cliff with direction up, or set dont_fragment = false"
            )
        family = "ipv6" if ":" in ctx.target.address else "ipv4"
        m = Measurement(params={"generator": {"program": "iperf3", "processes": 1, "flows": 1}})
        log: list[dict[str, Any]] = []
        seen: dict[int, SizePoint] = {}

        def at(size: int) -> SizePoint:
            if size not in seen:
                seen[size] = self._step(ctx, opts, size)
                log.append({"size": size, "delivered_pps": seen[size].delivered_pps, "note": seen[size].note})
            return seen[size]

        points = [at(size) for size in sweep_sizes(opts.start, opts.stop, opts.step)]
        cliff = find_cliff(points, opts.drop)
        if cliff is not None and opts.refine:
            floor = at(cliff.last_good).delivered_pps
            good, bad = refine(cliff, lambda s: at(s).delivered_pps >= (1.0 - opts.drop) * floor)
            cliff = Cliff(good, bad, 1.0 - at(bad).delivered_pps / at(good).delivered_pps)
        m.metrics[MTU_STEPS.name] = float(len(seen))
        m.metrics[MTU_FOUND.name] = 1.0 if cliff else 0.0
        if cliff is not None:
            m.metrics[MTU_MAX_PAYLOAD.name] = float(cliff.last_good)
            m.metrics[MTU_CLIFF.name] = float(cliff.first_bad)
            m.metrics[MTU_DEPTH.name] = cliff.depth
            m.metrics[MTU_PATH.name] = float(cliff.last_good + INNER_HEADERS[family])
        if (route := self._route_mtu(ctx)) is not None:
            m.metrics[MTU_ROUTE.name] = float(route)
            m.metrics[MTU_EXPECTED.name] = float(expected_payload(route, family))
            if cliff is not None:
                m.metrics[MTU_ERROR.name] = float(cliff.last_good - expected_payload(route, family))
        m.series["mtu_delivered_pps"] = [(float(s), p.delivered_pps) for s, p in sorted(seen.items())]
        m.artifacts["mtu.json"] = json.dumps(log, indent=1).encode()
        return m

    def _step(self, ctx: Context, opts: MtuOptions, size: int) -> SizePoint:
        """One size at the offered packet rate; a test the sender could not run (its kernel refused the
        datagram, EMSGSIZE) delivered nothing, and says why."""
        note = ""
        for last in (False, True):  # a second try: a control connection can fail after an overload
            try:
                run = run_udp(
                    ctx, rate_bps=opts.pps * 8 * size, size=size, duration_s=opts.step_s, tag=f"mtu {size} B",
                    buffer=opts.socket_buffer, dont_fragment=opts.dont_fragment,
                )  # fmt: skip
                return SizePoint(size, delivered_pps(run, size))
            except (TrialError, CommandFailed) as e:
                note = str(e)[-200:]
                if REFUSED in note or last:  # the kernel's EMSGSIZE: trying again would say the same
                    break
        return SizePoint(size, 0.0, note)

    def _route_mtu(self, ctx: Context) -> int | None:
        """The MTU of the client's route to the target (None where it cannot be read): the tunnel's device,
        whose MTU the adapters set alike on both sides."""
        route = ctx.client.run(["ip", "route", "get", ctx.target.address], check=False, what="the client's route")
        dev = route_device(route.stdout) if route.returncode == 0 else None
        if dev is None:
            return None
        link = ctx.client.run(["ip", "-o", "link", "show", "dev", dev], check=False, what="the route's device")
        return link_mtu(link.stdout) if link.returncode == 0 else None

    def timeout_s(self, ctx: Context) -> float:
        o = self.opts(ctx.options)
        return _probes(o) * (o.step_s + 5.0) + 10.0

    def estimate(self, case: CaseAxes, options: BaseModel, window: Window) -> float:
        o = self.opts(options)
        return _probes(o) * (o.step_s + 0.5) + TRIAL_SETUP_S


def known_answer(tunnel: str, mtu: int, family: str = "ipv4") -> tuple[int, int]:
    """A tunnel's MTU cliff as its adapter configures it: (largest payload the tunnel carries with DF, the
    outer packet that inner packet makes on the underlay). HEADERS holds the outer header sizes."""
    return expected_payload(mtu, family), mtu + HEADERS[tunnel][family]
