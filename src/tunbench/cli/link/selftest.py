"""`tunbench link selftest`: measure the emulator against its targets, side by side in one run.

Every measurement goes through real namespaces, real TUN devices and real traffic (iperf3 and the UDP
probe); the verdicts come from accuracy.py.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunbench.cli.link.shell import emulated_pair
from tunbench.host.ledger import Ledger
from tunbench.host.proc import Daemon, run_cmd
from tunbench.host.scope import run_scope
from tunbench.host.workdir import workdir as host_workdir
from tunbench.link import accuracy, mahimahi
from tunbench.link.emulator import LinkEmulator
from tunbench.link.profile import Profile, parse_inline
from tunbench.topology.build import Topology
from tunbench.tunnels import probes
from tunbench.workloads import iperf3

PROBE_PORT = 7000
SYSCTLS = {"net.ipv4.tcp_rmem": "4096 131072 33554432", "net.ipv4.tcp_wmem": "4096 16384 33554432"}


@dataclass
class Result:
    name: str
    passed: bool | None  # None: measured, no bound to pass
    detail: str
    numbers: dict[str, Any] = field(default_factory=dict)


class Bench:
    """One ledger + workdir for the whole self-test; each measurement gets a fresh emulated pair."""

    def __init__(self, ledger: Ledger, workdir: Path, seed: int) -> None:
        self.ledger = ledger
        self.workdir = workdir
        self.seed = seed
        self.n = 0

    @contextlib.contextmanager
    def pair(self, profile: Profile) -> Iterator[Topology]:
        self.n += 1
        wd = self.workdir / f"m{self.n}"
        wd.mkdir()
        with emulated_pair(profile, self.ledger, wd, seed=self.seed, sysctls=SYSCTLS) as topo:
            yield topo

    def iperf3(self, topo: Topology, extra: list[str], timeout_s: float) -> dict[str, Any]:
        with Daemon(
            iperf3.server_argv(iperf3_port := 5201),
            ledger=self.ledger,
            what="iperf3 server",
            log_path=self.workdir / f"iperf3-{self.n}.log",
            netns=topo.server.name,
        ):
            _wait(lambda: probes.port_open(topo.server.name, iperf3_port), 10, "iperf3 server")
            res = run_cmd(
                ["iperf3", "-c", topo.addr.server, "-J", *extra],
                netns=topo.client.name,
                timeout_s=timeout_s,
                check=False,
            )
        doc: dict[str, Any] = json.loads(res.stdout)
        if doc.get("error"):
            raise RuntimeError(f"iperf3: {doc['error']}")
        return doc

    def probe(
        self,
        topo: Topology,
        count: int,
        interval_us: float,
        size: int = 64,
        background: list[str] | None = None,
        before: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """Send `count` probes client -> server; optionally with an iperf3 load running the same way, and
        `before` called right before the first probe. The receiver's seqs and one-way delays, and
        `send_start_mono_ns`: probe `seq` left at that CLOCK_MONOTONIC time + seq x interval."""
        log = self.workdir / f"probe-{self.n}.log"
        recv = Daemon(
            [
                sys.executable,
                "-m",
                "tunbench.link.probe",
                "recv",
                "--port",
                str(PROBE_PORT),
                "--count",
                str(count),
                "--idle-timeout",
                "2",
            ],
            ledger=self.ledger,
            what="probe receiver",
            log_path=log,
            netns=topo.server.name,
        )
        with contextlib.ExitStack() as stack:
            stack.callback(recv.stop)
            _wait(lambda: "ready" in log.read_text(), 10, "probe receiver")
            if background:
                srv = Daemon(
                    iperf3.server_argv(5201),
                    ledger=self.ledger,
                    what="iperf3 server",
                    log_path=self.workdir / f"bg-{self.n}.log",
                    netns=topo.server.name,
                )
                stack.callback(srv.stop)
                _wait(lambda: probes.port_open(topo.server.name, 5201), 10, "iperf3 server")
                bg = Daemon(
                    ["iperf3", "-c", topo.addr.server, *background],
                    ledger=self.ledger,
                    what="iperf3 load",
                    log_path=self.workdir / f"bgc-{self.n}.log",
                    netns=topo.client.name,
                )
                stack.callback(bg.stop)
                time.sleep(1.0)  # let the load reach its steady state before probing
            if before is not None:
                before()
            sent = run_cmd(
                [
                    sys.executable,
                    "-m",
                    "tunbench.link.probe",
                    "send",
                    "--to",
                    topo.addr.server,
                    "--port",
                    str(PROBE_PORT),
                    "--count",
                    str(count),
                    "--interval-us",
                    str(interval_us),
                    "--size",
                    str(size),
                ],
                netns=topo.client.name,
                timeout_s=count * interval_us / 1e6 + 30,
            )
            recv.proc.wait(timeout=30)
        lines = [ln for ln in log.read_text().splitlines() if ln.startswith("{")]
        out = dict(json.loads(lines[-1])) if lines else {"seqs": [], "owd_ns": []}
        out["send_start_mono_ns"] = json.loads(sent.stdout or "{}").get("start_mono_ns")
        return out


def _wait(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready after {timeout_s:g} s")
        time.sleep(0.02)


def _tcp_bps(doc: dict[str, Any]) -> float:
    return float(doc["end"]["sum_received"]["bits_per_second"])


PLAIN_VETH = Profile(name="lan", emulated=False)  # the same pair of namespaces, no emulator between them
PASSTHROUGH_RATIO = 0.8  # passthrough TCP vs a plain veth (issue 15's bar; 0.6 before it)


def passthrough_throughput(b: Bench, duration_s: float, rounds: int) -> Result:
    """TCP through the emulator (no impairment) vs plain veth, interleaved, ratio of medians."""
    veth: list[float] = []
    link: list[float] = []
    for _ in range(rounds):
        for name, out in (("lan", veth), ("passthrough", link)):
            prof = parse_inline(f"{name}:", "selftest") if name == "passthrough" else PLAIN_VETH
            with b.pair(prof) as topo:
                out.append(_tcp_bps(b.iperf3(topo, ["-t", f"{duration_s:g}", "-O", "1"], duration_s + 20)))
    ratio = statistics.median(link) / statistics.median(veth)
    return Result(
        "passthrough TCP vs veth",
        ratio >= PASSTHROUGH_RATIO,
        f"{statistics.median(link) / 1e9:.2f} vs {statistics.median(veth) / 1e9:.2f} Gbit/s "
        f"= {ratio:.2f}× (target >= {PASSTHROUGH_RATIO:g}×, median of {rounds})",
        {"veth_bps": veth, "link_bps": link, "ratio": ratio},
    )


def delay(b: Bench, delay_ms: float, load: bool) -> list[Result]:
    if load:
        rate_mbit = 100
        prof = parse_inline(f"d:delay={delay_ms:g}ms,rate={rate_mbit}mbit,queue=1000p", "selftest")
        # 80% of the rate as paced UDP (payload 1400 -> 1428-byte IP packets)
        payload = 0.8 * rate_mbit * 1e6 * 1400 / 1428
        bg = ["-u", "-b", f"{payload:.0f}", "-l", "1400", "-t", "30", "--pacing-timer", "100"]
        size = 64
        # the probe's own serialization at the bottleneck is part of its expected delay
        expected_ns = delay_ms * 1e6 + (size + 28) * 8 / (rate_mbit * 1e6) * 1e9
    else:
        prof = parse_inline(f"d:delay={delay_ms:g}ms", "selftest")
        bg, size, expected_ns = None, 64, delay_ms * 1e6
    with b.pair(prof) as topo:
        out = b.probe(topo, 3000, 1000, size=size, background=bg)
    chk = accuracy.delay_check(out["owd_ns"], expected_ns)
    what = "at 80% load of 100 Mbit/s" if load else "idle"
    return [
        Result(
            f"one-way delay error {what}",
            chk.passed,
            f"p50 {chk.p50_error_us:+.1f} µs, p99 {chk.p99_error_us:+.1f} µs, max {chk.max_error_us:+.0f} µs "
            f"over {chk.n} probes at {delay_ms:g} ms, end to end (targets |p50| <= 20, |p99| <= 100 µs; "
            f"{chk.early} early)",
            {"p50_us": chk.p50_error_us, "p99_us": chk.p99_error_us, "n": chk.n, "early": chk.early},
        ),
        own_lateness(topo.link.stats if isinstance(topo.link, LinkEmulator) else None, what),
    ]


def own_lateness(stats: dict[str, Any] | None, what: str) -> Result:
    """The emulator's own timer error, from its counters: how long after its scheduled departure each
    packet (probes and load alike) was written, without the TUN path and the probe's sockets around it."""
    up = (stats or {}).get("a2b") or {}
    if "late_us_p50" not in up:
        return Result(f"emulator's own lateness {what}", None, "the emulator reported no lateness percentiles")
    p50, p99, p999 = up["late_us_p50"], up["late_us_p99"], up["late_us_p999"]
    n = int(up.get("delivered_packets", 0))
    return Result(
        f"emulator's own lateness {what}",
        p50 <= accuracy.DELAY_P50_US and p99 <= accuracy.DELAY_P99_US,
        f"p50 <= {p50} µs, p99 <= {p99} µs, p99.9 <= {p999} µs, max {up.get('late_us_max', 0):.0f} µs over "
        f"{n} packets (departure vs schedule, inside the emulator)",
        {"p50_us": p50, "p99_us": p99, "p999_us": p999, "n": n},
    )


def base_path(b: Bench) -> list[Result]:
    """One-way delay through the emulator with no impairment, and through a plain veth with the same probe:
    the veth's is the two network stacks and the probe's sockets (there with any link), the difference is
    the emulator's path (two TUN devices, its threads waking up). A delay profile's error is the
    emulator's path plus its timer's lateness."""
    out: list[Result] = []
    for prof, what in ((PLAIN_VETH, "plain veth"), (parse_inline("p:", "selftest"), "")):
        with b.pair(prof) as topo:
            got = b.probe(topo, 3000, 1000)
        chk = accuracy.delay_check(got["owd_ns"], 0.0)
        if what:
            detail = f"the stacks and the probe's sockets alone, the baseline of every path; over {chk.n} probes"
            name = "one-way delay through a plain veth (no emulator)"
        else:
            veth = out[0].numbers["p50_us"]
            detail = (
                f"over {chk.n} probes: the emulator's path (two TUN devices, its threads waking) adds "
                f"{chk.p50_error_us - veth:+.1f} µs at the median to the veth's; included in every delay error below"
            )
            name = "one-way delay through passthrough (no delay configured)"
        out.append(
            Result(
                name,
                None,
                f"p50 {chk.p50_error_us:.1f} µs, p99 {chk.p99_error_us:.1f} µs {detail}",
                {"p50_us": chk.p50_error_us, "p99_us": chk.p99_error_us, "n": chk.n},
            )
        )
    return out


def rate(b: Bench, rate_bps: float, seconds: int = 5) -> Result:
    prof = parse_inline(f"r:down.rate={rate_bps:.0f}bit,down.queue=2000p", "selftest")
    payload = 1400
    offered = 1.15 * rate_bps * payload / (payload + 28)
    with b.pair(prof) as topo:
        doc = b.iperf3(
            topo,
            ["-u", "-R", "-b", f"{offered:.0f}", "-l", str(payload), "-t", str(seconds + 1), "-O", "1"],
            seconds + 30,
        )
    windows = [
        accuracy.ip_rate(float(iv["sum"]["bits_per_second"]), payload)
        for iv in doc["intervals"]
        if not iv["sum"].get("omitted") and float(iv["sum"]["seconds"]) > 0.9
    ]
    chk = accuracy.RateCheck(rate_bps, tuple(windows))
    sent = doc.get("end", {}).get("sum_sent", {}).get("bits_per_second")
    offered_ip = accuracy.ip_rate(float(sent), payload) if sent else None
    if offered_ip is not None and offered_ip < rate_bps * (1 + chk.bound):
        # the traffic generator could not even offer the rate: nothing to say about the emulator's accuracy
        return Result(
            f"rate accuracy at {rate_bps / 1e6:g} Mbit/s",
            None,
            f"not measurable here: iperf3 offered only {offered_ip / 1e6:.0f} Mbit/s (sender-limited on this host); "
            f"delivered {chk.mean_bps / 1e6:.1f} Mbit/s",
            {"windows_bps": windows, "offered_bps": offered_ip},
        )
    return Result(
        f"rate accuracy at {rate_bps / 1e6:g} Mbit/s",
        chk.passed,
        f"mean {chk.mean_bps / 1e6:.3f} Mbit/s, worst 1-s window {chk.worst_error:+.2%} off "
        f"(target ±1%; offered {1.15:.2f}× the rate)",
        {"windows_bps": windows, "worst_error": chk.worst_error},
    )


COST_TARGET = 0.10  # of one core, at 100 Mbit/s (issue 15)


def cost(b: Bench, rate_bps: float, seconds: int = 5) -> Result:
    """One TCP flow (upload) through a rate limit: the emulator's CPU (all its threads, user + system, from
    /proc) as a share of one core over the flow's own seconds (iperf3's; the CPU is taken around the whole
    iperf3 exchange, so its start and end count, and the share errs high, never low), and what got through."""
    import psutil

    prof = parse_inline(f"c:up.rate={rate_bps:.0f}bit", "selftest")
    with b.pair(prof) as topo:
        emu = topo.link
        assert isinstance(emu, LinkEmulator) and emu.pid is not None
        proc = psutil.Process(emu.pid)
        t0, c0 = time.monotonic(), proc.cpu_times()
        doc = b.iperf3(topo, ["-t", str(seconds)], seconds + 20)
        t1, c1 = time.monotonic(), proc.cpu_times()
    flow_s = float(doc["end"]["sum_sent"]["seconds"]) or (t1 - t0)
    share = (c1.user + c1.system - c0.user - c0.system) / flow_s
    got = _tcp_bps(doc)
    bound = COST_TARGET if rate_bps == 100e6 else None
    return Result(
        f"emulator CPU at {rate_bps / 1e6:g} Mbit/s",
        None if bound is None else share <= bound,
        f"{share:.1%} of a core (user {c1.user - c0.user:.2f} s + system {c1.system - c0.system:.2f} s over "
        f"the flow's {flow_s:.1f} s, {t1 - t0:.1f} s with iperf3's start and end), one TCP flow upload, "
        f"goodput {got / 1e6:.1f} Mbit/s" + (f" (target <= {bound:.0%})" if bound is not None else ""),
        {"core_share": share, "goodput_bps": got, "rate_bps": rate_bps},
    )


def loss(b: Bench, count: int = 20000) -> list[Result]:
    out = []
    for spec, expected, burst, name in (
        ("loss=1%", 0.01, None, "Bernoulli loss 1%"),
        ("ge_p=1%,ge_r=25%", 0.01 / 0.26, 4.0, "Gilbert-Elliott p=1% r=25%"),
    ):
        with b.pair(parse_inline(f"l:up.{spec.replace(',', ',up.')}", "selftest")) as topo:
            res = b.probe(topo, count, 100)
        chk = accuracy.loss_check(res["seqs"], count, expected, expected_burst=burst)
        detail = (
            f"{chk.measured:.3%} lost of {count} (99% CI {chk.ci_low:.3%}–{chk.ci_high:.3%}, configured {expected:.3%})"
        )
        if burst is not None:
            detail += (
                f"; mean burst {chk.mean_burst:.2f} (99% CI {chk.burst_ci[0]:.2f}–{chk.burst_ci[1]:.2f}, "
                f"expected {burst:g})"
            )
        out.append(Result(name, chk.passed, detail, {"measured": chk.measured, "mean_burst": chk.mean_burst}))
    return out


EVENT_MS = 1.0  # an event must land within this of its time (seen from outside the emulator)
TRACE_WINDOW_ERROR = 0.02  # delivered bytes per 100 ms window vs the trace's


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
    stepping 10 / 30 / 20 Mbit/s: the bytes the receiver got in each 100 ms window of the trace's own clock
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
            _wait(lambda: "ready" in log.read_text(), 10, "receiver")
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


STEPS = ("passthrough", "path", "delay", "rate", "cost", "loss", "schedule", "trace")


def run_selftest(
    *, seed: int, quick: bool, report: Callable[[Result], None], only: tuple[str, ...] = STEPS
) -> list[Result]:
    results: list[Result] = []
    with run_scope() as ledger, host_workdir(ledger, "selftest") as workdir:
        _selftest_steps(Bench(ledger, workdir, seed), quick, report, results, only)
    return results


def _selftest_steps(
    b: Bench, quick: bool, report: Callable[[Result], None], results: list[Result], only: tuple[str, ...]
) -> None:
    secs = 3 if quick else 5
    named: list[tuple[str, Callable[[], list[Result] | Result]]] = [
        ("passthrough", lambda: passthrough_throughput(b, secs, 1 if quick else 3)),
        ("path", lambda: base_path(b)),
        ("delay", lambda: delay(b, 10, load=False)),
        ("delay", lambda: delay(b, 10, load=True)),
        ("rate", lambda: rate(b, 10e6, secs)),
        ("rate", lambda: rate(b, 100e6, secs)),
        ("rate", lambda: rate(b, 1e9, secs)),
        ("cost", lambda: cost(b, 10e6, secs)),
        ("cost", lambda: cost(b, 100e6, secs)),
        ("cost", lambda: cost(b, 1e9, secs)),
        ("loss", lambda: loss(b, 10000 if quick else 20000)),
        ("schedule", lambda: schedule_timing(b)),
        ("trace", lambda: trace_accuracy(b)),
    ]
    steps = [step for name, step in named if name in only]
    for step in steps:
        try:
            got = step()
        except Exception as e:  # one failed measurement must not hide the others
            got = Result(getattr(step, "__name__", "measurement"), False, f"could not measure: {e}")
        for r in got if isinstance(got, list) else [got]:
            results.append(r)
            report(r)
