"""The emulator's self-test against time (link/selftest.py runs them): scheduled events landing when the
profile says, and a trace replayed per 100 ms interval, both seen from outside the emulator."""

from __future__ import annotations

import json
import statistics
import sys
import time

from tunbench.host.proc import Daemon, run_cmd
from tunbench.link import mahimahi
from tunbench.link.bench import PROBE_PORT, Bench, Result, wait_for
from tunbench.link.emulator import LinkEmulator
from tunbench.link.profile import Profile

EVENT_MS = 1.0  # an event must land within this of its time (seen from outside the emulator)
TRACE_WINDOW_ERROR = 0.02  # delivered bytes per 100 ms interval vs the trace's


def schedule_timing(b: Bench) -> Result:
    """A delay change at 0.5 s and a 0.5 s outage at 1 s (upload), seen from outside the emulator by probes
    every 250 µs: how far from each event's time the first probe that saw it and the last that did not were
    sent. Probe `seq` counts as sent at its planned time (the sender keeps to it within microseconds)."""
    prof = Profile.model_validate(
        {
            "name": "sched",
            "up": {"delay": "1ms"},
            "events": [
                {"at": "500ms", "direction": "up", "delay": "20ms"},
                {"at": "1s", "direction": "up", "outage": "500ms"},
            ],
        }
    )
    interval_ns, count, ms = 250_000, 8000, 1_000_000
    with b.pair(prof) as topo:
        emu = topo.link
        assert isinstance(emu, LinkEmulator)
        out = b.probe(topo, count, interval_ns / 1000, before=emu.start_schedule)
    start = emu.stats["schedule"]["start_ns"]
    sent = {seq: out["send_start_mono_ns"] + seq * interval_ns - start for seq in range(count)}
    owd = dict(zip(out["seqs"], out["owd_ns"], strict=True))
    # each edge: (last probe sent before it that kept the old state, first sent after that had the new)
    slow = [sent[s] for s in owd if owd[s] > 10 * ms]
    fast = [sent[s] for s in owd if owd[s] <= 10 * ms and sent[s] < 1000 * ms]
    lost = sorted(sent[s] for s in sent if s not in owd)
    got_early = [sent[s] for s in owd if sent[s] < 1000 * ms]
    got_late = [sent[s] for s in owd if sent[s] >= 1000 * ms]
    edges = {
        "delay change at 500 ms": (max(fast, default=0) - 500 * ms, min(slow, default=0) - 500 * ms),
        "outage at 1000 ms": (max(got_early, default=0) - 1000 * ms, (lost[0] if lost else 0) - 1000 * ms),
        "return at 1500 ms": ((lost[-1] if lost else 0) - 1500 * ms, min(got_late, default=0) - 1500 * ms),
    }
    worst = max(abs(x) for pair in edges.values() for x in pair) / ms
    inside = sum(1 for s, t in sent.items() if 1001 * ms <= t < 1499 * ms and s in owd)
    applied = emu.stats["schedule"]["a2b"]
    late = max((e["late_ns"] for e in applied), default=0) / 1e3
    ok = worst <= EVENT_MS and inside == 0 and bool(lost) and len(applied) == 3
    return Result(
        "scheduled events land on time",
        ok,
        "; ".join(f"{k}: {a / 1e3:+.0f} / {c / 1e3:+.0f} µs" for k, (a, c) in edges.items())
        + f" (last probe before / first after each edge, probes every 250 µs; target within {EVENT_MS:g} ms); "
        f"{len(lost)} probes lost to the outage, {inside} through it; the emulator applied the events at most "
        f"{late:.0f} µs late",
        {"edges_us": {k: [a / 1e3, c / 1e3] for k, (a, c) in edges.items()}, "lost": len(lost), "late_us": late},
    )


def trace_accuracy(b: Bench) -> Result:
    """UDP at twice the trace's highest rate (1500-byte IP packets: one per opportunity) through a link
    stepping 10 / 30 / 20 Mbit/s: the bytes the receiver got in each 100 ms interval of the trace's own clock
    against the trace's, from 0.3 s (the queue filled) to 3 s (the trace's first round)."""
    trace = mahimahi.opportunities([mbit * 1e6 for mbit in (10, 30, 20) for _ in range(1000)])  # 1 s each
    path = b.workdir / "step.mm"
    path.write_text(mahimahi.text(trace))
    prof = Profile.model_validate({"name": "tr", "up": {"trace": str(path), "queue": "200p"}})
    log = b.workdir / "trace-recv.log"
    with b.pair(prof) as topo:
        emu = topo.link
        assert isinstance(emu, LinkEmulator)
        recv = Daemon(
            [sys.executable, "-m", "tunbench.link.probe", "recv", "--port", str(PROBE_PORT + 1), "--count",
             "100000", "--idle-timeout", "1", "--times"],
            ledger=b.ledger, what="receiver", log_path=log, netns=topo.server.name,
        )  # fmt: skip
        with recv:
            wait_for(lambda: "ready" in log.read_text(), 10, "receiver")
            wall_minus_mono = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.monotonic_ns()
            emu.start_schedule()
            run_cmd(  # 60 Mbit/s for 4 s: 5 datagrams of 1472 bytes (1500 IP bytes) every ms
                [sys.executable, "-m", "tunbench.link.probe", "send", "--to", topo.addr.server, "--port",
                 str(PROBE_PORT + 1), "--count", "20000", "--interval-us", "1000", "--size", "1472", "--burst", "5"],
                netns=topo.client.name, timeout_s=30,
            )  # fmt: skip
            recv.proc.wait(timeout=30)
    start = emu.stats["schedule"]["start_ns"]
    lines = [ln for ln in log.read_text().splitlines() if ln.startswith("{")]
    got = json.loads(lines[-1]) if lines else {"rx_ns": [], "bytes": []}
    window = 100_000_000
    delivered: dict[int, int] = {}
    for rx, size in zip(got["rx_ns"], got["bytes"], strict=True):
        w = (rx - wall_minus_mono - start) // window
        delivered[w] = delivered.get(w, 0) + size + 28  # UDP payload -> IP bytes
    allowed: dict[int, int] = {}
    for ms in trace:
        allowed[ms * 1_000_000 // window] = allowed.get(ms * 1_000_000 // window, 0) + 1500
    errors = [delivered.get(w, 0) / allowed[w] - 1 for w in range(3, 30)]
    worst = max(errors, key=abs)
    return Result(
        "trace replay per 100 ms",
        abs(worst) <= TRACE_WINDOW_ERROR and emu.stats["a2b"]["dropped_queue"] > 0,
        f"delivered vs the trace in {len(errors)} windows of 100 ms: worst {worst:+.2%}, mean |error| "
        f"{statistics.mean(abs(e) for e in errors):.2%} (target ±{TRACE_WINDOW_ERROR:.0%}; 10/30/20 Mbit/s steps, "
        "offered 60 Mbit/s)",
        {"errors": errors, "worst": worst},
    )
