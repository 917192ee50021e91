#!/usr/bin/env python3
"""tunbench against the field's own tools, by hand, on the same kind of link: a standing cross-check.

    python scripts/cross_check.py --rounds 5                       # everything below, as root
    python scripts/cross_check.py --rounds 5 --only rr,udp-rr --via wireguard-go
    python scripts/cross_check.py --rounds 6 --only throughput --via wireguard-go --omit 1   # hand_vs_tunbench.py

Each check alternates (hand first in even rounds) a measurement made by hand, with the reference tool's own
commands and none of tunbench's code, with `tunbench run` of the matching workload, and prints the medians
and tunbench/hand with a 95% bootstrap CI:

| check | by hand | tunbench |
|---|---|---|
| throughput | `iperf3 -c -t D -O O`, receiver's bit/s | `-w iperf3 --direction up`, throughput |
| rr | `netperf -t TCP_RR -- -r 1,1 -D`, transactions/s | `-w rr`, rr.transactions_per_s |
| udp-rr | `netperf -t UDP_RR -- -r 1,1`, transactions/s | `-w udp-rr`, rr.transactions_per_s |
| pps64 | a search over `iperf3 -u -l 64 -b R -t 1 -w 2M` steps (below) | `-w pps` at 64 B, pps.64.delivered_pps |

`--via direct` measures over the bare veth of the hand pair and tunbench's `direct` baseline; `--via
wireguard-go` through wireguard-go set up by hand (scripts/hand_pair.py: two namespaces, a veth, `wg`) and
tunbench's wireguard-go trial. Both sides get a fresh pair per measurement, as a tunbench trial brings its
pair up; `--sysctl KEY=VALUE` sets a sysctl in the hand pair's namespaces too (tunbench sets its own).
Flent's RRUL has its own scripts (it needs an emulated link): scripts/flent_vs_rrul.py alternates Flent and rrul
and prints the ratios, scripts/flent_compare.py reads files and runs side by side.

The hand search for pps follows the rules docs/workloads-packets.md states (start at the ceiling; after a
failure try 0.98 of what was delivered, after a pass of that just above it; below a failed 0.98 guess at most
half of it; otherwise geometric midpoints;
stop within 5% or after 8 steps; loss ≤ 0.1%), written again here from that text, so that a mistake in
tunbench's search shows as a disagreement.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hand_pair import INNER, OUTER, PREFIX, hand_pair, paired_ci, ratio_ci, sh

CHECKS = ("throughput", "rr", "udp-rr", "pps64")
TUNBENCH_METRIC = {
    "throughput": "throughput_bps",
    "rr": "rr.transactions_per_s",
    "udp-rr": "rr.transactions_per_s",
    "pps64": "pps.64.delivered_pps",
}
UNIT = {"throughput": "Mbit/s", "rr": "tx/s", "udp-rr": "tx/s", "pps64": "pps"}


@contextlib.contextmanager
def server(ns: str, argv: list[str], port: int = 5201) -> Iterator[None]:
    """A server started in `ns` for one measurement, ended by its pid; the client starts as soon as the server
    listens on `port` (`ss`), as a tunbench trial's does (a fixed pause would give the tunnel time to drain
    between two steps that tunbench's steps do not have)."""
    proc = subprocess.Popen(
        ["ip", "netns", "exec", ns, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while not sh("ss", "-Hltn", f"sport = :{port}", ns=ns).strip():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{argv[0]} in {ns} is not listening on {port}")
            time.sleep(0.01)
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def hand_throughput(cns: str, sns: str, peer: str, duration: int, omit: int) -> float:
    with server(sns, ["iperf3", "-s", "-1", "-B", peer]):
        out = sh("iperf3", "-c", peer, "-t", str(duration), "-O", str(omit), "-J", ns=cns, timeout=duration + 30)
    return float(json.loads(out)["end"]["sum_received"]["bits_per_second"]) / 1e6


def hand_netperf(test: str) -> Callable[[str, str, str, int, int], float]:
    def measure(cns: str, sns: str, peer: str, duration: int, omit: int) -> float:
        argv = ["netperf", "-H", peer, "-p", "5201", "-4", "-t", test, "-l", str(duration), "-j", "-P", "0"]
        argv += ["--", "-k", "TRANSACTION_RATE", "-r", "1,1"] + (["-D"] if test == "TCP_RR" else [])
        with server(sns, ["netserver", "-D", "-p", "5201"]):
            out = sh(*argv, ns=cns, timeout=duration + 30)
        rates = [line.split("=", 1)[1] for line in out.splitlines() if line.startswith("TRANSACTION_RATE=")]
        if not rates:
            raise RuntimeError(f"netperf printed no TRANSACTION_RATE: {out[-300:]!r}")
        return float(rates[0])

    return measure


def udp_step(cns: str, sns: str, peer: str, size: int, pps: float) -> tuple[float, float]:
    """One second of `iperf3 -u -l size` at `pps` offered: (loss fraction, delivered packets/s). The loss is the
    receiver's (end.sum_received: datagrams lost of those it counted); delivered is the datagrams that arrived
    over the sender's seconds (end.sum_sent), the step's length, not the receiver's, which run on while the
    tunnel drains."""
    rate = f"{pps * size * 8:.0f}"
    with server(sns, ["iperf3", "-s", "-1", "-B", peer]):
        out = sh("iperf3", "-c", peer, "-u", "-l", str(size), "-b", rate, "-t", "1", "-w", "2M", "-J", ns=cns)
    end = json.loads(out)["end"]
    packets, lost = float(end["sum_received"]["packets"]), float(end["sum_received"]["lost_packets"])
    return (lost / packets if packets else 1.0), (packets - lost) / float(end["sum_sent"]["seconds"])


STEPS: list[tuple[float, float, float]] = []
"""The last hand search's steps: (offered packets/s, loss, delivered packets/s), for --json."""


def search(step: Callable[[float], tuple[float, float]]) -> float:
    """The highest packet rate delivered with loss ≤ 0.1%, searched between 1000 and 1e6 packets/s by the
    rules docs/workloads-packets.md states; `step(pps)` is one step's (loss, delivered packets/s)."""
    STEPS.clear()
    lo: float | None = None
    hi, floor_pps, threshold, tolerance = 1e6, 1000.0, 0.001, 0.05
    rate, hint, delivered_at_lo, near, guessed = hi, None, 0.0, False, None
    for n in range(8):
        loss, delivered = step(rate)
        STEPS.append((rate, loss, delivered))
        if loss <= threshold:
            lo, delivered_at_lo = rate, delivered
            if rate >= hi:
                break
            hint = rate * (1 + 0.99 * tolerance) if n == 1 and hint is not None and rate == hint else None
        else:
            hi = rate
            near = near or rate == guessed  # the 0.98 guess failed: the limit is just below it
            hint = delivered * 0.98 if n == 0 else None
        if lo is not None and hi / lo <= 1 + tolerance:
            break
        low = lo if lo is not None else floor_pps
        if lo is None and rate <= floor_pps:
            break  # even the floor lost too much
        if hint is not None and low < hint < hi:
            rate = hint
            guessed = rate if n == 0 else guessed
        elif lo is None and hi / low <= 1 + tolerance:
            rate = floor_pps
        elif lo is not None:
            rate = min(math.sqrt(lo * hi), 2 * lo)
        elif near:
            rate = max(math.sqrt(low * hi), hi / 2)
        else:
            rate = math.sqrt(low * hi)
    return delivered_at_lo


def hand_pps(cns: str, sns: str, peer: str, duration: int, omit: int, size: int = 64) -> float:
    """The hand search (`search`) over one-second iperf3 steps at `size` bytes."""
    return search(lambda pps: udp_step(cns, sns, peer, size, pps))


HAND: dict[str, Callable[..., float]] = {
    "throughput": hand_throughput,
    "rr": hand_netperf("TCP_RR"),
    "udp-rr": hand_netperf("UDP_RR"),
    "pps64": hand_pps,
}


def hand_once(check: str, via: str, workdir: Path, duration: int, omit: int, sysctls: dict[str, str]) -> float:
    with hand_pair(workdir, sysctls) as (cns, sns):
        peer = INNER[1] if via == "wireguard-go" else OUTER[1]
        return HAND[check](cns, sns, peer, duration, omit)


def tunbench_once(check: str, via: str, workdir: Path, duration: int, omit: int) -> float:
    scenario = workdir / "pps64.toml"
    scenario.write_text("[workload.pps]\nsizes = [64]\n")
    workload = {"throughput": "iperf3", "rr": "rr", "udp-rr": "udp-rr", "pps64": "pps"}[check]
    out = workdir / "tb.json"
    cmd = [sys.executable, "-m", "tunbench", "run"]
    cmd += [str(scenario)] if check == "pps64" else []
    cmd += ["-t", via, "-w", workload, "--direction", "up", "--duration", str(duration), "--omit", str(omit)]
    cmd += ["--repeat", "1", "--db", str(workdir / "tb.db"), "--json", str(out)]
    cmd += [] if via == "direct" else ["--no-direct"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=duration * 4 + 180)
    if res.returncode != 0:
        raise RuntimeError(f"tunbench run exit {res.returncode}: {(res.stderr or res.stdout)[-600:]}")
    trials = [t for t in json.loads(out.read_text())["trials"] if t.get("tunnel") == via]
    (trial,) = trials
    TB_STEPS[:] = [tuple(s) for s in (trial.get("series") or {}).get("pps_loss.64", [])]
    key = TUNBENCH_METRIC[check]
    value = trial[key] if key in trial else trial["metrics"][key]
    return float(value) / (1e6 if check == "throughput" else 1.0)


TB_STEPS: list[tuple[float, ...]] = []
"""The last tunbench pps trial's steps: (offered packets/s, loss), its series pps_loss.64, for --json."""


def sysctl_pair(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not key or not eq:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=3)
    ap.add_argument("--omit", type=int, default=0)
    ap.add_argument("--only", default=",".join(CHECKS), help=f"comma-separated, of {', '.join(CHECKS)}")
    ap.add_argument("--via", default="direct,wireguard-go", help="direct, wireguard-go or both (comma-separated)")
    ap.add_argument("--json", type=Path, help="write every measurement and ratio here")
    ap.add_argument(
        "--sysctl",
        type=sysctl_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set in the hand pair's namespaces too (e.g. tunbench's net.ipv4.tcp_rmem='4096 131072 33554432')",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    checks = [c for c in args.only.split(",") if c]
    vias = [v for v in args.via.split(",") if v]
    if bad := [c for c in checks if c not in CHECKS] + [v for v in vias if v not in ("direct", "wireguard-go")]:
        print(f"unknown check or path: {', '.join(bad)}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: the finally blocks clean up
    sysctls = dict(args.sysctl)
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}-") as tmp:
        work = Path(tmp)
        for via in vias:
            for check in checks:
                hand: list[float] = []
                tb: list[float] = []
                steps: dict[str, list[object]] = {"hand": [], "tunbench": []}
                for r in range(args.rounds):
                    for who in ("hand", "tunbench") if r % 2 == 0 else ("tunbench", "hand"):
                        if who == "hand":
                            hand.append(hand_once(check, via, work, args.duration, args.omit, sysctls))
                        else:
                            tb.append(tunbench_once(check, via, work, args.duration, args.omit))
                        value = (hand if who == "hand" else tb)[-1]
                        if check == "pps64":
                            steps[who].append(list(STEPS if who == "hand" else TB_STEPS))
                        print(
                            f"{via} {check} round {r + 1}/{args.rounds} {who:8s} {value:10.1f} {UNIT[check]}",
                            flush=True,
                        )
                point, lo, hi = ratio_ci(hand, tb)
                paired = paired_ci(hand, tb)
                print(
                    f"== {via} {check}: hand median {np.median(hand):.1f} ({min(hand):.1f}-{max(hand):.1f}), "
                    f"tunbench median {np.median(tb):.1f} ({min(tb):.1f}-{max(tb):.1f}) {UNIT[check]}; "
                    f"tunbench/hand {point:.3f} [{lo:.3f}, {hi:.3f}] (n = {len(hand)} + {len(tb)}); "
                    f"the rounds' own ratios: median {paired[0]:.3f} [{paired[1]:.3f}, {paired[2]:.3f}]",
                    flush=True,
                )
                results[f"{via}/{check}"] = {
                    "hand": hand, "tunbench": tb, "ratio": [point, lo, hi], "paired": list(paired),
                    **({"steps": steps} if check == "pps64" else {}),
                }  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
