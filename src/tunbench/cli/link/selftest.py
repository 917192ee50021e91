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
from tunbench.link import accuracy
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


def passthrough_throughput(b: Bench, duration_s: float, rounds: int) -> Result:
    """TCP through the emulator (no impairment) vs plain veth, interleaved, ratio of medians."""
    veth: list[float] = []
    link: list[float] = []
    for _ in range(rounds):
        for name, out in (("lan", veth), ("passthrough", link)):
            prof = (
                parse_inline(f"{name}:", "selftest") if name == "passthrough" else Profile(name="lan", emulated=False)
            )
            with b.pair(prof) as topo:
                out.append(_tcp_bps(b.iperf3(topo, ["-t", f"{duration_s:g}", "-O", "1"], duration_s + 20)))
    ratio = statistics.median(link) / statistics.median(veth)
    return Result(
        "passthrough TCP vs veth",
        ratio >= 0.6,
        f"{statistics.median(link) / 1e9:.2f} vs {statistics.median(veth) / 1e9:.2f} Gbit/s "
        f"= {ratio:.2f}× (target >= 0.6×, median of {rounds})",
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


def base_path(b: Bench) -> Result:
    """One-way delay through the emulator with no impairment: the TUN path's own latency, which every
    delay measurement includes (the 'error' of a delay profile is this plus the timer's lateness)."""
    with b.pair(parse_inline("p:", "selftest")) as topo:
        out = b.probe(topo, 3000, 1000)
    chk = accuracy.delay_check(out["owd_ns"], 0.0)
    return Result(
        "one-way delay through passthrough (no delay configured)",
        None,
        f"p50 {chk.p50_error_us:.1f} µs, p99 {chk.p99_error_us:.1f} µs over {chk.n} probes: the path's own latency "
        "(two TUN devices, the emulator's threads, the probe's sockets), included in every delay error below",
        {"p50_us": chk.p50_error_us, "p99_us": chk.p99_error_us, "n": chk.n},
    )


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


def run_selftest(*, seed: int, quick: bool, report: Callable[[Result], None]) -> list[Result]:
    results: list[Result] = []
    with run_scope() as ledger, host_workdir(ledger, "selftest") as workdir:
        _selftest_steps(Bench(ledger, workdir, seed), quick, report, results)
    return results


def _selftest_steps(b: Bench, quick: bool, report: Callable[[Result], None], results: list[Result]) -> None:
    steps: list[Callable[[], list[Result] | Result]] = [
        lambda: passthrough_throughput(b, 3 if quick else 5, 1 if quick else 3),
        lambda: base_path(b),
        lambda: delay(b, 10, load=False),
        lambda: delay(b, 10, load=True),
        lambda: rate(b, 10e6, 3 if quick else 5),
        lambda: rate(b, 100e6, 3 if quick else 5),
        lambda: rate(b, 1e9, 3 if quick else 5),
        lambda: loss(b, 10000 if quick else 20000),
    ]
    for step in steps:
        try:
            got = step()
        except Exception as e:  # one failed measurement must not hide the others
            got = Result(getattr(step, "__name__", "measurement"), False, f"could not measure: {e}")
        for r in got if isinstance(got, list) else [got]:
            results.append(r)
            report(r)
