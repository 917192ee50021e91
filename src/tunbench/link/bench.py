"""The bench the emulator's self-test measures on (link/selftest.py): one ledger and working directory
for the whole test, a fresh emulated pair per measurement, and the traffic through it (iperf3 and the UDP
probe, link/probe.py), all through real namespaces, real TUN devices and real traffic."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunbench.host.ledger import Ledger
from tunbench.host.place import LocalPlace
from tunbench.host.proc import Daemon, run_cmd
from tunbench.link.pair import emulated_pair
from tunbench.link.profile import Profile
from tunbench.topology.build import Topology, TopologySpec

PROBE_PORT = 7000
IPERF3_PORT = 5201
# the iperf3 server as workloads/iperf3.py starts it (a layer this one may not import): one test, then it
# exits; a client that disappears mid-test times out
IPERF3_SERVER = ("iperf3", "-s", "-1", "-p", str(IPERF3_PORT), "--rcv-timeout", "15000")
SYSCTLS = {"net.ipv4.tcp_rmem": "4096 131072 33554432", "net.ipv4.tcp_wmem": "4096 16384 33554432"}


@dataclass
class Result:
    """One verdict of the self-test: its name, whether it is within its bound, the line that says so, and
    its numbers (what --json writes)."""

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
        with emulated_pair(profile, self.ledger, wd, seed=self.seed, base=TopologySpec(sysctls=SYSCTLS)) as topo:
            yield topo

    def port_open(self, topo: Topology, port: int) -> bool:
        """Whether a TCP port listens in the pair's server namespace."""
        return LocalPlace(topo.server.name, self.ledger, self.workdir).port_open(port)

    def iperf3(self, topo: Topology, extra: list[str], timeout_s: float) -> dict[str, Any]:
        """An iperf3 test client -> server (`extra`: the client's flags), as iperf3's JSON report."""
        with Daemon(
            list(IPERF3_SERVER),
            ledger=self.ledger,
            what="iperf3 server",
            log_path=self.workdir / f"iperf3-{self.n}.log",
            netns=topo.server.name,
        ):
            wait_for(lambda: self.port_open(topo, IPERF3_PORT), 10, "iperf3 server")
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
            wait_for(lambda: "ready" in log.read_text(), 10, "probe receiver")
            if background:
                srv = Daemon(
                    list(IPERF3_SERVER),
                    ledger=self.ledger,
                    what="iperf3 server",
                    log_path=self.workdir / f"bg-{self.n}.log",
                    netns=topo.server.name,
                )
                stack.callback(srv.stop)
                wait_for(lambda: self.port_open(topo, IPERF3_PORT), 10, "iperf3 server")
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


def wait_for(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll `cond` until it holds; a RuntimeError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready after {timeout_s:g} s")
        time.sleep(0.02)


def tcp_bps(doc: dict[str, Any]) -> float:
    """The bits per second an iperf3 TCP test delivered."""
    return float(doc["end"]["sum_received"]["bits_per_second"])
