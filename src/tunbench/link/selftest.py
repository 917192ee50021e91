"""`tunbench link selftest`'s measurements: the emulator against its targets, side by side in one run, each
a verdict (link/bench.py's Result) from accuracy.py. Passthrough throughput, the base path, delay, rate,
CPU cost and loss are here; scheduled events and trace replay in timed.py."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from tunbench.host.scope import run_scope
from tunbench.host.workdir import workdir as host_workdir
from tunbench.link import accuracy
from tunbench.link.bench import Bench, Result, tcp_bps
from tunbench.link.emulator import LinkEmulator
from tunbench.link.profile import Profile, parse_inline
from tunbench.link.timed import schedule_timing, trace_accuracy

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
                out.append(tcp_bps(b.iperf3(topo, ["-t", f"{duration_s:g}", "-O", "1"], duration_s + 20)))
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
    per_second = [
        accuracy.ip_rate(float(iv["sum"]["bits_per_second"]), payload)
        for iv in doc["intervals"]
        if not iv["sum"].get("omitted") and float(iv["sum"]["seconds"]) > 0.9
    ]
    chk = accuracy.RateCheck(rate_bps, tuple(per_second))
    sent = doc.get("end", {}).get("sum_sent", {}).get("bits_per_second")
    offered_ip = accuracy.ip_rate(float(sent), payload) if sent else None
    if offered_ip is not None and offered_ip < rate_bps * (1 + chk.bound):
        # the traffic generator could not even offer the rate: nothing to say about the emulator's accuracy
        return Result(
            f"rate accuracy at {rate_bps / 1e6:g} Mbit/s",
            None,
            f"not measurable here: iperf3 offered only {offered_ip / 1e6:.0f} Mbit/s (sender-limited on this host); "
            f"delivered {chk.mean_bps / 1e6:.1f} Mbit/s",
            {"seconds_bps": per_second, "offered_bps": offered_ip},
        )
    return Result(
        f"rate accuracy at {rate_bps / 1e6:g} Mbit/s",
        chk.passed,
        f"mean {chk.mean_bps / 1e6:.3f} Mbit/s, worst 1-s window {chk.worst_error:+.2%} off "
        f"(target ±1%; offered {1.15:.2f}× the rate)",
        {"seconds_bps": per_second, "worst_error": chk.worst_error},
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
    got = tcp_bps(doc)
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
