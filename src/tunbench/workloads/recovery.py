"""Recovery from an outage: paced UDP probes through the tunnel (irtt, one every 10 ms) while the profile's
events take the link down and up, then how the tunnel came back: how long after the link returned the
first probe was sent that got through, the probes lost, the longest silence; with `tcp = true` an iperf3
flow runs alongside (up, 100 ms intervals), and the time until its throughput is back to 90% of its level
before the outage, and whether its connection survived. Where the tunnel's adapter declares how to count its
handshakes (`[handshakes]`: from its log, a command or its UAPI socket; tunnels/handshakes.py), it is read
before the outage, every half second and at the end: `recovery.handshakes` is how many it completed from
the disruption's start to the end of the trial (absent for a tunnel that declares no counter).

The link's times come from the emulator itself (when it started the profile's schedule, and when it
applied each event); the probes' from irtt's timestamps (the server's receive time, on this host's clock).
The profile must take the link down (an `outage` of the upload direction), move the client (`rebind`),
carry an upload trace with a silence of at least 100 ms (a handover), or a fault `during` a span of the
schedule (docs/faults.md; the first fault that fired is then the disruption, lasting no time, as a rebind):
`tunbench run -w recovery --profile PROFILE`. The figures are for the first of these.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tunbench.errors import TrialError
from tunbench.link import mahimahi
from tunbench.link.emulator import LinkEmulator
from tunbench.link.fault_record import fired
from tunbench.link.profile import Profile, ProfileEvent
from tunbench.metrics import declare
from tunbench.results import TrialRecord
from tunbench.tunnels.handshakes import HandshakeSampler
from tunbench.units import Window, fmt
from tunbench.workloads import iperf3, irtt
from tunbench.workloads.base import TRIAL_SETUP_S, CaseAxes, Column, Context, Measurement, Workload

RECOVERY_MS = declare(
    "recovery.{span}_ms", "ms", "lower", "info",
    "The recovery workload's times: `outage` (link down to up), `first_after` (the first reply after it), "
    "`silence` (the longest gap), `tcp_90` (TCP back to 90% of its rate).",
    choices={"span": ("outage", "first_after", "silence", "tcp_90")},
)  # fmt: skip
PROBES = declare(
    "recovery.probes_{count}", "count", "none", "info", "Probes sent and lost around the outage.",
    choices={"count": ("sent", "lost")},
)  # fmt: skip
TCP_SURVIVED = declare("recovery.tcp_survived", "flag", "higher", "info", "1 when the TCP flow lived through it.")
TCP_BEFORE = declare("recovery.tcp_before_bps", "bit/s", "none", "info", "The TCP flow's rate before the outage.")
HANDSHAKES = declare("recovery.handshakes", "count", "none", "info", "The tunnel's handshakes during the trial.")

BACK_FRACTION = 0.9  # "recovered": throughput at 90% of its level before the outage
TCP_INTERVAL_S = 0.1


class RecoveryOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    interval_ms: float = Field(default=10.0, gt=0.1, le=1000.0, description="probe interval")
    tcp: bool = Field(default=False, description="also run one TCP flow (iperf3, up) through the outage")


@dataclass(frozen=True)
class Probe:
    """One probe: when the client sent it and when the server got it (None: lost on the way up), wall ns."""

    sent_ns: int
    server_rx_ns: int | None
    replied: bool


def probes(doc: dict[str, Any]) -> list[Probe]:
    """irtt's round trips (its JSON) as probes, in send order."""
    out: list[Probe] = []
    for rt in doc.get("round_trips") or []:
        ts = rt.get("timestamps") or {}
        sent = ((ts.get("client") or {}).get("send") or {}).get("wall")
        if sent is None:
            continue
        rx = ((ts.get("server") or {}).get("receive") or {}).get("wall")
        lost = str(rt.get("lost", "false"))
        out.append(Probe(int(sent), int(rx) if rx and lost in ("false", "true_down") else None, lost == "false"))
    return out


def disruptions(schedule: dict[str, Any], start_wall_ns: int, rebinds: Collection[int] = ()) -> list[tuple[int, int]]:
    """The link's disruptions in time order (wall ns, from when to when) as the upload direction saw them
    (the probes' way to the server: its receive times are what the figures use): its outages (down to up)
    and its rebinds (`rebinds`: which of its events are; a rebind lasts no time), from the emulator's
    applied events."""
    events = schedule.get("a2b") or []
    downs = [e["at_ns"] for e in events if e.get("kind") == "down"]
    ups = [e["at_ns"] for e in events if e.get("kind") == "up"]
    moves = [e["at_ns"] for e in events if e.get("kind") == "set" and e.get("event") in rebinds]
    found = [*zip(downs, ups, strict=False), *((t, t) for t in moves)]
    return sorted((start_wall_ns + a, start_wall_ns + b) for a, b in found)


def tcp_intervals(doc: dict[str, Any]) -> list[tuple[float, float]]:
    """iperf3's intervals as (end time since the flow's start in s, bit/s)."""
    out = []
    for iv in doc.get("intervals") or []:
        s = iv.get("sum") or {}
        if "end" in s and "bits_per_second" in s and not s.get("omitted"):
            out.append((float(s["end"]), float(s["bits_per_second"])))
    return out


def recovery_metrics(
    probe_list: list[Probe],
    outage: tuple[int, int],
    tcp: list[tuple[float, float]] | None = None,
    tcp_start_ns: int | None = None,
    tcp_error: str = "",
    until_ns: int | None = None,
    expected: int = 0,
) -> dict[str, float | None]:
    """The recovery from one outage or rebind (`outage`: from, to; a rebind's are equal) (pure):
    `recovery.first_after_ms` from the link's return (or the rebind) to the sending
    of the first probe that reached the server (the probes enter the link as they are sent: a tunnel that
    needs a new handshake loses the probes sent meanwhile; with none, this is at most one probe interval),
    `recovery.silence_ms` the longest time the server got no probe (up to `until_ns`, the planned end of
    the probes, if none came after it: the tunnel never came back, and the first figure is None), the probes
    lost (in either direction; of `expected`, when fewer were sent),
    and for a TCP flow the time after the return until an interval reached 90% of the mean throughput
    before the outage, and whether the flow survived."""
    down, up = outage
    got = sorted(p.server_rx_ns for p in probe_list if p.server_rx_ns is not None)
    after = sorted(p.sent_ns for p in probe_list if p.server_rx_ns is not None and p.sent_ns >= up)
    gaps = [b - a for a, b in itertools.pairwise(got)]
    end = max([p.sent_ns for p in probe_list] + ([until_ns] if until_ns is not None else []), default=0)
    if got and end > got[-1]:  # silent to the end: the tunnel never came back
        gaps.append(end - got[-1])
    replied = sum(p.replied for p in probe_list)
    m: dict[str, float | None] = {
        RECOVERY_MS.key(span="outage"): (up - down) / 1e6,
        PROBES.key(count="sent"): float(len(probe_list)),
        # not answered; when irtt sent far fewer than planned (it stops when the tunnel's device goes away),
        # of those planned
        PROBES.key(count="lost"): float((expected if len(probe_list) < 0.9 * expected else len(probe_list)) - replied),
        RECOVERY_MS.key(span="first_after"): (after[0] - up) / 1e6 if after else None,
        RECOVERY_MS.key(span="silence"): max(gaps) / 1e6 if gaps else None,
    }
    if tcp is not None and tcp_start_ns is not None:
        m[TCP_SURVIVED.name] = 0.0 if tcp_error else 1.0
        rel_down, rel_up = (down - tcp_start_ns) / 1e9, (up - tcp_start_ns) / 1e9
        before = [bps for end, bps in tcp if end <= rel_down]
        level = sum(before) / len(before) if before else math.nan
        m[TCP_BEFORE.name] = level if before else None
        back = next((end for end, bps in tcp if end > rel_up and bps >= BACK_FRACTION * level), None)
        m[RECOVERY_MS.key(span="tcp_90")] = (back - rel_up) * 1e3 if back is not None and before else None
    return m


class RecoveryWorkload(Workload[Context, RecoveryOptions]):
    kind = "recovery"
    description = "recovery from an outage: UDP probes every 10 ms (irtt) [+ a TCP flow]; first packet after"
    axes = ()
    layers = ("l3",)
    Options = RecoveryOptions
    requires = ("irtt", "iperf3")
    keeps_logs = True  # why a tunnel did not come back (e.g. "TLS keys are out of sync") is in its log
    columns = (
        Column("down ms", RECOVERY_MS.key(span="outage"), "ms"),
        Column("first after ms", RECOVERY_MS.key(span="first_after"), "ms"),
        Column("silence ms", RECOVERY_MS.key(span="silence"), "ms"),
        Column("probes lost", PROBES.key(count="lost"), "n"),
        Column("TCP 90% ms", RECOVERY_MS.key(span="tcp_90"), "ms"),
        Column("handshakes", HANDSHAKES.name, "n"),
    )
    caption = (
        "after the link's return (or the rebind): the first probe through (– : none), the longest silence, "
        "TCP back to 90%; the tunnel's handshakes from the disruption on (– : no counter declared, or unreadable)"
    )

    def headline(self, rec: TrialRecord) -> str:
        m = rec.metrics
        hs = HANDSHAKES.name
        handshakes = f", {fmt(m[hs], 'n')} handshakes" if hs in m else ""
        first, lost = m.get(RECOVERY_MS.key(span="first_after")), m.get(PROBES.key(count="lost"))
        return f"first probe through {fmt(first, 'ms')} ms after the change, {fmt(lost, 'n')} lost{handshakes}"

    def profile_problem(self, profile: Profile) -> str:
        return "" if measurable(profile) else NOTHING_TO_RECOVER.format(name=profile.name)

    def prepare(self, ctx: Context, stack: contextlib.ExitStack) -> None:
        _emulator(ctx)  # before its servers start
        stack.enter_context(irtt.IrttServer(ctx))
        if self.opts(ctx.options).tcp:
            server = ctx.server.spawn(
                iperf3.server_argv(ctx.server_port), what="iperf3 server", log_name="iperf3-server.log"
            )
            stack.callback(server.stop)
            iperf3.wait_listening(ctx.server, ctx.server_port, server)

    def measure(self, ctx: Context) -> Measurement:
        opts = self.opts(ctx.options)
        emu = _emulator(ctx)
        wall_minus_mono = time.time_ns() - time.monotonic_ns()
        flow, tcp_start = None, None
        name = "iperf3-flow.json"
        if opts.tcp:
            params = iperf3.Iperf3Params(
                duration_s=math.ceil(ctx.window.duration_s),
                omit_s=0,
                interval_s=TCP_INTERVAL_S,
                logfile=str(ctx.client.workdir / name),
            )
            tcp_start = time.time_ns()  # iperf3 counts its intervals from after its connect: a ms or two later
            flow = ctx.client.spawn(
                iperf3.client_argv(ctx.target.address, ctx.target.port, params),
                what="iperf3 flow",
                log_name="iperf3-client.log",
            )
        # the tunnel's handshakes, read before the disruption, every half second and at the end
        sampler = HandshakeSampler(ctx.handshakes) if ctx.handshakes is not None else None
        try:
            with sampler or contextlib.nullcontext():
                _, raw = irtt.run_client(ctx, ctx.window.duration_s, "irtt", interval=f"{opts.interval_ms:g}ms")
                if flow is not None:
                    deadline = time.monotonic() + ctx.window.duration_s + 30
                    while flow.alive() and time.monotonic() < deadline:
                        time.sleep(0.05)
        finally:
            if flow is not None:
                flow.stop()
        stats = _stats(emu)
        schedule = dict(stats.get("schedule") or {})
        start_mono = schedule.get("start_ns")
        if start_mono is None:
            raise TrialError("the emulator never started the profile's schedule")
        up_events = emu.profile.event_indexes("up")
        rebinds = {n for n, i in enumerate(up_events) if emu.profile.events[i].rebind}
        start_wall = int(start_mono) + wall_minus_mono
        found = (
            disruptions(schedule, start_wall, rebinds)
            or [(start_wall + a * 1_000_000, start_wall + b * 1_000_000) for a, b in upload_trace_gaps(emu.profile)]
            or [(start_wall + h.at_ns,) * 2 for h in fired(stats, emu.profile.faults) if h.at_ns is not None][:1]
        )
        found = [d for d in found if d[0] < start_wall + int(ctx.window.duration_s * 1e9)]
        if not found:
            raise TrialError(
                "no outage, rebind, trace gap or fault happened within the trial (is it within --duration?)"
            )
        m = Measurement(artifacts={"irtt.json": raw})
        tcp, tcp_error = None, ""
        if flow is not None:
            text = (ctx.client.read(name) or b"").decode(errors="replace")
            m.artifacts["iperf3.json"] = text.encode()
            try:
                doc = json.loads(text)
                tcp, tcp_error = tcp_intervals(doc), str(doc.get("error") or "")
            except json.JSONDecodeError:
                tcp, tcp_error = [], "iperf3 wrote no JSON"
        plist = probes(json.loads(raw))
        first = min((p.sent_ns for p in plist), default=0)
        until = first + int(ctx.window.duration_s * 1e9)
        expected = int(ctx.window.duration_s * 1000 / opts.interval_ms)
        m.metrics.update(recovery_metrics(plist, found[0], tcp, tcp_start, tcp_error, until, expected))
        if sampler is not None:  # a tunnel that declares no handshake counter has no such figure (not 0)
            n = sampler.since(found[0][0])
            m.metrics[HANDSHAKES.name] = float(n) if n is not None else None
            m.artifacts["handshakes.json"] = handshake_readings(sampler, found[0][0])
        m.series["recovery_send_ms"] = [  # the probes that reached the server: their one-way delay
            ((p.sent_ns - first) / 1e9, (p.server_rx_ns - p.sent_ns) / 1e6) for p in plist if p.server_rx_ns
        ]
        if tcp:  # the report draws it with the profile's events (the schedule started with the workload)
            m.series["throughput_bps.up"] = tcp
        return m

    def timeout_s(self, ctx: Context) -> float:
        return ctx.window.duration_s + 60.0

    def estimate(self, case: CaseAxes, options: BaseModel, window: Window) -> float:
        return window.duration_s + 3.0 + TRIAL_SETUP_S  # irtt waits up to 3 s for late replies


def handshake_readings(sampler: HandshakeSampler, since_ns: int) -> bytes:
    """The readings behind `recovery.handshakes`, to check it by: what they are (count, time, age), each one's
    time and value (None: it failed), times in s from the disruption's start."""
    rows = [[round((r.at_ns - since_ns) / 1e9, 3), r.value] for r in sampler.readings]
    return json.dumps({"value": sampler.reader.value, "readings": rows}).encode()


TRACE_GAP_MS = 100  # a trace's silence at least this long counts as an outage (a handover)


def faulted(profile: Profile) -> bool:
    """Whether a fault of the profile can hit the tunnel while the probes run: one `during` a span of the
    schedule (a counted one fires in the bring-up, before them)."""
    return any(f.timed for f in profile.faults)


def disrupts(event: ProfileEvent) -> bool:
    """Whether the recovery workload measures through this event: an outage of the upload direction (the
    probes' way to the server), or a rebind."""
    return bool(event.rebind) or (event.outage is not None and event.applies_to("up"))


def upload_trace_gaps(profile: Profile) -> list[tuple[int, int]]:
    """The silences of the profile's upload trace, if it has one (a handover in an LTE drive), in ms."""
    path = profile.up.get("trace")
    return list(mahimahi.file_gaps(path, TRACE_GAP_MS)) if path else []


def measurable(profile: Profile) -> bool:
    """Whether the recovery workload has something to measure through in this profile."""
    return any(disrupts(e) for e in profile.events) or bool(upload_trace_gaps(profile)) or faulted(profile)


NOTHING_TO_RECOVER = (
    "the recovery workload measures a tunnel through an outage of the upload direction, a rebind, an upload "
    "trace's silence or a fault during a span of the schedule, and profile {name} has none (docs/profiles.md, "
    "e.g. the built-in profiles outage-3s, nat-rebind, lte-handover; docs/faults.md)"
)


def _emulator(ctx: Context) -> LinkEmulator:
    link = getattr(ctx.topo, "link", None)
    if not isinstance(link, LinkEmulator) or not measurable(link.profile):  # refused before the run
        name = link.profile.name if isinstance(link, LinkEmulator) else "lan"
        raise TrialError(NOTHING_TO_RECOVER.format(name=name))
    return link


def _stats(emu: LinkEmulator) -> dict[str, Any]:
    """The emulator's stats file (its schedule, its faults), once rewritten after the traffic ended (it is
    rewritten every second; waited for at most 2.5 s): every step applied during the trial is in it."""

    def mtime() -> int:
        with contextlib.suppress(OSError):
            return emu.stats_path.stat().st_mtime_ns
        return 0

    before, deadline = mtime(), time.monotonic() + 2.5
    while mtime() == before and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(OSError, ValueError):
        return dict(json.loads(emu.stats_path.read_text()))
    return {}
