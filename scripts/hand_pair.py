"""The hand-made pair of scripts/cross_check.py: two network namespaces joined by a veth pair
(198.19.250.0/30) and wireguard-go on each side (198.19.251.0/24 inside), set up with its own `ip` and `wg`
commands and none of tunbench's code, and the ratio of two medians with a 95% bootstrap CI
(scipy.stats.bootstrap, percentile, 2000 resamples, seeded). Everything it creates carries the prefix
`tbh<pid>` and is removed on exit, error, Ctrl-C and SIGTERM (by the pids it started).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
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


def paired_ci(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """The median of the rounds' own ratios b[i] / a[i] and its 95% percentile-bootstrap CI: each round's two
    measurements ran back to back, so what drifted between rounds (the machine's other work) falls on both."""
    ratios = np.asarray(b) / np.asarray(a)
    point = float(np.median(ratios))
    if len(ratios) < 2:
        return point, float("nan"), float("nan")
    res = stats.bootstrap((ratios,), np.median, vectorized=True, n_resamples=2000, method="percentile", random_state=1)
    return point, float(res.confidence_interval.low), float(res.confidence_interval.high)
