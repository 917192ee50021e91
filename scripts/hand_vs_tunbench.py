#!/usr/bin/env python3
"""A wireguard-go pair set up by hand (its own `ip`, `wg`, `iperf3` commands, none of tunbench's code),
alternated with `tunbench run` of the same tunnel, and the ratio of their medians with a 95% CI.

    python scripts/hand_vs_tunbench.py --rounds 5 --duration 3 --omit 1       # as root, from the checkout
    python scripts/hand_vs_tunbench.py --rounds 1 --json out.json            # what the integration test runs

Each round measures both, in alternating order (hand first in even rounds). The hand pair is two network
namespaces joined by a veth pair (198.19.250.0/30), wireguard-go on each side (198.19.251.0/24 inside),
iperf3 -s -1 in the server namespace and `iperf3 -c -t D -O O -J` from the client: the receiver's bits per
second over the D measured seconds, the same quantity tunbench reports. Everything it creates carries the
prefix `tbh<pid>` and is removed on exit, error, Ctrl-C and SIGTERM (by the pids it started).

Prints one line per measurement and, at the end, the medians and tunbench/hand with a bootstrap CI
(scipy.stats.bootstrap, percentile, 2000 resamples, seeded). docs/benchmarks/interference.md holds a result.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from scipy import stats

PREFIX = f"tbh{os.getpid() % 100000:05d}"
OUTER = ("198.19.250.1", "198.19.250.2")
INNER = ("198.19.251.1", "198.19.251.2")
PORT = 51820


def sh(*argv: str, ns: str | None = None, inp: str | None = None, timeout: float = 30) -> str:
    cmd = ["ip", "netns", "exec", ns, *argv] if ns else list(argv)
    return subprocess.run(cmd, input=inp, capture_output=True, text=True, check=True, timeout=timeout).stdout


@contextlib.contextmanager
def hand_pair(workdir: Path, sysctls: dict[str, str]) -> Iterator[tuple[str, str]]:
    """Two namespaces, a veth pair and wireguard-go on each side; yields (client ns, server ns)."""
    cns, sns = f"{PREFIX}c", f"{PREFIX}s"
    procs: list[subprocess.Popen[bytes]] = []
    made: list[str] = []
    try:
        for ns in (cns, sns):
            sh("ip", "netns", "add", ns)
            made.append(ns)
            sh("ip", "link", "set", "lo", "up", ns=ns)
            for key, value in sysctls.items():
                sh("sysctl", "-q", "-w", f"{key}={value}", ns=ns)
        sh("ip", "link", "add", f"{PREFIX}a", "netns", cns, "type", "veth", "peer", "name", f"{PREFIX}b", "netns", sns)
        for ns, dev, addr in ((cns, f"{PREFIX}a", OUTER[0]), (sns, f"{PREFIX}b", OUTER[1])):
            sh("ip", "addr", "add", f"{addr}/30", "dev", dev, ns=ns)
            sh("ip", "link", "set", dev, "up", ns=ns)
        keys = {}
        for side in ("c", "s"):
            private = sh("wg", "genkey").strip()
            keys[side] = (private, sh("wg", "pubkey", inp=private + "\n").strip())
            (workdir / f"{side}.key").write_text(private + "\n")
            os.chmod(workdir / f"{side}.key", 0o600)
        for side, ns, inner, peer, peer_inner in (
            ("s", sns, INNER[1], "c", INNER[0]),
            ("c", cns, INNER[0], "s", INNER[1]),
        ):
            dev = f"{PREFIX}w{side}"
            procs.append(
                subprocess.Popen(
                    ["ip", "netns", "exec", ns, "wireguard-go", "-f", dev],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                    env={**os.environ, "LOG_LEVEL": "error"},
                )
            )
            sock = Path(f"/var/run/wireguard/{dev}.sock")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                listening = sock.exists() and f"/{dev}.sock" in Path("/proc/net/unix").read_text()
                if listening:
                    break
                time.sleep(0.02)
            args = ["wg", "set", dev, "private-key", str(workdir / f"{side}.key")]
            args += ["listen-port", str(PORT)] if side == "s" else []
            args += ["peer", keys[peer][1], "allowed-ips", f"{peer_inner}/32"]
            args += ["endpoint", f"{OUTER[1]}:{PORT}"] if side == "c" else []
            sh(*args, ns=ns)
            sh("ip", "addr", "add", f"{inner}/24", "dev", dev, ns=ns)
            sh("ip", "link", "set", dev, "mtu", "1420", "up", ns=ns)
        sh("ping", "-c", "1", "-W", "2", INNER[1], ns=cns)  # the handshake, before any measurement
        yield cns, sns
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=5)
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def hand_once(workdir: Path, duration: int, omit: int, sysctls: dict[str, str]) -> float:
    """One hand measurement on a fresh pair (as a tunbench trial brings its pair up): Mbit/s received."""
    with hand_pair(workdir, sysctls) as (cns, sns):
        server = subprocess.Popen(
            ["ip", "netns", "exec", sns, "iperf3", "-s", "-1", "-B", INNER[1]],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            time.sleep(0.3)
            out = sh(
                "iperf3", "-c", INNER[1], "-t", str(duration), "-O", str(omit), "-J", ns=cns, timeout=duration + 30
            )
            return float(json.loads(out)["end"]["sum_received"]["bits_per_second"]) / 1e6
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=10)


def tunbench_once(workdir: Path, duration: int, omit: int) -> float:
    out = workdir / "tb.json"
    cmd = [sys.executable, "-m", "tunbench", "run", "-t", "wireguard-go", "--direction", "up", "--no-direct"]
    cmd += ["--duration", str(duration), "--omit", str(omit), "--repeat", "1"]
    cmd += ["--db", str(workdir / "tb.db"), "--json", str(out)]
    subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=duration + 120)
    (trial,) = json.loads(out.read_text())["trials"]
    return float(trial["throughput_bps"]) / 1e6


def ratio_ci(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """median(b) / median(a) and a 95% percentile-bootstrap CI (independent resamples of each side)."""
    point = float(np.median(b) / np.median(a))
    if len(a) < 2 or len(b) < 2:
        return point, float("nan"), float("nan")
    res = stats.bootstrap(
        (np.asarray(a), np.asarray(b)),
        lambda x, y, axis=-1: np.median(y, axis=axis) / np.median(x, axis=axis),
        vectorized=True,
        paired=False,
        n_resamples=2000,
        method="percentile",
        random_state=1,
    )
    return point, float(res.confidence_interval.low), float(res.confidence_interval.high)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=3)
    ap.add_argument("--omit", type=int, default=1)
    ap.add_argument("--json", type=Path, help="write the measurements and the ratio here")
    ap.add_argument(
        "--sysctl",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set in the hand pair's namespaces too (e.g. tunbench's net.ipv4.tcp_rmem='4096 131072 33554432')",
    )
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: the finally blocks clean up
    sysctls = dict(kv.split("=", 1) for kv in args.sysctl)
    hand: list[float] = []
    tb: list[float] = []
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}-") as tmp:
        work = Path(tmp)
        for r in range(args.rounds):
            order = ("hand", "tunbench") if r % 2 == 0 else ("tunbench", "hand")
            for who in order:
                if who == "hand":
                    hand.append(hand_once(work, args.duration, args.omit, sysctls))
                else:
                    tb.append(tunbench_once(work, args.duration, args.omit))
                print(
                    f"round {r + 1}/{args.rounds} {who:8s} {(hand if who == 'hand' else tb)[-1]:7.1f} Mbit/s",
                    flush=True,
                )
    point, lo, hi = ratio_ci(hand, tb)
    print(
        f"hand median {np.median(hand):.0f} Mbit/s ({min(hand):.0f}-{max(hand):.0f}), tunbench median "
        f"{np.median(tb):.0f} ({min(tb):.0f}-{max(tb):.0f}); tunbench/hand {point:.3f} [{lo:.3f}, {hi:.3f}] "
        f"(n = {len(hand)} + {len(tb)})"
    )
    if args.json:
        args.json.write_text(json.dumps({"hand_mbps": hand, "tunbench_mbps": tb, "ratio": [point, lo, hi]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
