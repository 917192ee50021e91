"""The agent's side of a measured window on its host (`watch_start` / `watch_stop`, agent.py): what else ran
here (foreign CPU, steal, other tunbench runs), the agent's own CPU, and the underlay device's counters, each
read at an instant the controller chose on this host's clock, by sleeping until it.

- **Foreign CPU** is monitor/interference.py's reading: every process's exact CPU (with its reaped children)
  that is neither this agent's tree (the agent, the tunnel daemons and generators it started) nor a kernel
  thread, nor one of the agent's ancestors (the SSH session that carries its requests).
- **Which processes are this host's**: every one /proc shows, unless this agent's network namespace is not
  the one of pid 1 (a "host" that is a namespace of a machine it shares with others, as the test hosts are,
  or a container without a pid namespace of its own): then only the processes in the agent's network or
  mount namespace are, so another host's tunnel is not this host's interference.
- **Steal** is this host's /proc/stat, not the controller's.
- **The underlay counters** are the bytes, packets and drops of the device that holds the host's underlay
  address (`/proc/net/dev`) and the kernel's UDP/TCP counters (`/proc/net/snmp`) in the agent's namespace.
  The SSH connection that carries the agent's requests is counted at the same edges from its socket
  (`ss -tin`: bytes acknowledged and received, segments each way); when its local address is on the
  underlay device, its bytes and packets are taken off that device's counters, headers included
  (`control_overhead`), else they are on another device and nothing is taken off.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psutil

from tunbench.errors import CommandFailed
from tunbench.host.proc import run_cmd
from tunbench.monitor.counters import DEV_FIELDS, SNMP_FIELDS, Snapshot, parse_both
from tunbench.monitor.hostload import cpu_shares, cpu_times
from tunbench.monitor.interference import Edge, between, read_edge

# bytes of headers per TCP segment on an Ethernet device, as /proc/net/dev counts them (no FCS): Ethernet 14,
# IP 20 or 40, TCP 20 with the 12 bytes of timestamps that Linux sends by default
CONTROL_HEADER = {4: 14 + 20 + 32, 6: 14 + 40 + 32}


def _ns_inode(pid: int | str, kind: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/{kind}").st_ino
    except OSError:
        return None


def host_scope() -> Callable[[int], bool] | None:
    """None where this agent sees a host of its own (its network namespace is pid 1's); else which pids are
    this host's: those in the agent's network or mount namespace."""
    net, mnt = _ns_inode("self", "net"), _ns_inode("self", "mnt")
    if net is None or net == _ns_inode(1, "net"):
        return None
    return lambda pid: _ns_inode(pid, "net") == net or _ns_inode(pid, "mnt") == mnt


def ancestors() -> list[int]:
    """This process's ancestors below pid 1 (the shell and sshd processes that carry its requests)."""
    out = []
    with contextlib.suppress(psutil.Error):
        for p in psutil.Process().parents():
            if p.pid > 1:
                out.append(p.pid)
    return out


def control_socket(pids: list[int]) -> tuple[str, int, str, int] | None:
    """The SSH connection that carries this agent's requests: (local address, port, remote address, port) of
    the first established TCP socket of the nearest ancestor that holds one, or None."""
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            for c in psutil.Process(pid).net_connections(kind="tcp"):
                if c.status == psutil.CONN_ESTABLISHED and c.raddr:
                    return (str(c.laddr.ip), int(c.laddr.port), str(c.raddr.ip), int(c.raddr.port))
    return None


TCP_INFO_FIELDS = ("bytes_acked", "bytes_received", "segs_out", "segs_in")


def parse_tcp_info(text: str) -> dict[str, int]:
    """`ss -tin` output for one socket -> its bytes_acked, bytes_received, segs_out, segs_in (pure; a field
    ss does not print is left out)."""
    out = {}
    for name in TCP_INFO_FIELDS:
        if m := re.search(rf"\b{name}:(\d+)", text):
            out[name] = int(m.group(1))
    return out


def _endpoint(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def control_counts(sock: tuple[str, int, str, int]) -> dict[str, int]:
    laddr, lport, raddr, rport = sock
    argv = ["ss", "-tinH", "state", "established", "src", _endpoint(laddr, lport), "dst", _endpoint(raddr, rport)]
    with contextlib.suppress(CommandFailed, OSError):
        return parse_tcp_info(run_cmd(argv, timeout_s=5, what="the control connection's counters").stdout)
    return {}


def device_of(address: str) -> str | None:
    """The device of this namespace that holds `address`, or None."""
    want = ipaddress.ip_address(address)
    for dev, addrs in psutil.net_if_addrs().items():
        for a in addrs:
            with contextlib.suppress(ValueError):
                if ipaddress.ip_address(a.address.split("%")[0]) == want:
                    return str(dev)
    return None


def net_snapshot() -> Snapshot:
    """/proc/net/snmp and /proc/net/dev of the agent's namespace, read in-process (no program runs)."""
    with open("/proc/net/snmp") as snmp, open("/proc/net/dev") as dev:
        return parse_both(snmp.read() + dev.read())


@dataclass
class HostEdge:
    """One edge read on this host: when the agent woke for it (monotonic), how long the reading took."""

    woke: float
    read_s: float
    edge: Edge
    cpu: dict[str, float]
    net: Snapshot | None = None
    control: dict[str, int] = field(default_factory=dict)


@dataclass
class Watch:
    """What one window watches on this host: the runs that are this run's, the underlay device (None: no
    counters), the control connection's socket and whether it is on that device."""

    exclude: set[str]
    start_at: float
    device: str | None = None
    sock: tuple[str, int, str, int] | None = None
    control_device: str | None = None  # the device the control connection's local address is on
    scope: Callable[[int], bool] | None = None
    also_own: list[int] = field(default_factory=list)
    start: HostEdge | None = None
    error: str = ""
    thread: threading.Thread | None = None

    def read(self) -> HostEdge:
        # the counters that move fastest first (the device's bytes, the control connection's), the processes'
        # CPU last: reading every process takes ~20 ms on a 2-vCPU host, a share of a core-second it does not move
        t0 = time.monotonic()
        net = net_snapshot() if self.device else None
        control = control_counts(self.sock) if self.device and self.sock else {}
        cpu = cpu_times()
        edge = read_edge(self.exclude, also_own=self.also_own, scope=self.scope)
        return HostEdge(t0, time.monotonic() - t0, edge, cpu, net, control)

    def open(self) -> None:
        """Sleep until `start_at`, then read the start edge (on a thread of its own: `watch_start` answers
        at once)."""

        def run() -> None:
            sleep_until(self.start_at)
            try:
                self.start = self.read()
            except (OSError, psutil.Error) as e:
                self.error = str(e)

        self.thread = threading.Thread(target=run, name="tunbench-agent-watch", daemon=True)
        self.thread.start()

    def close(self, stop_at: float) -> dict[str, Any]:
        """Sleep until `stop_at`, read the end edge, and the window's figures (`figures`)."""
        sleep_until(stop_at)
        end = self.read()
        if self.thread is not None:
            self.thread.join(timeout=max(5.0, stop_at - time.monotonic()))
        if self.start is None:
            raise OSError(self.error or "the window's start edge was not read")
        family = 6 if self.sock and ":" in self.sock[0] else 4
        return figures(self.start, end, (self.start_at, stop_at), self.device, family, self.control_device)


def sleep_until(at: float) -> None:
    while (left := at - time.monotonic()) > 0:
        time.sleep(left)


def control_overhead(a: Mapping[str, int], b: Mapping[str, int], family: int) -> dict[str, float]:
    """The control connection's traffic between two readings of its socket (pure), as the device counts it:
    {rx,tx}_{bytes,packets}, payload plus a header per segment; {} without both readings."""
    if not all(k in a and k in b for k in TCP_INFO_FIELDS):
        return {}
    hdr = CONTROL_HEADER[family]
    segs_out, segs_in = b["segs_out"] - a["segs_out"], b["segs_in"] - a["segs_in"]
    return {
        "tx_bytes": float(b["bytes_acked"] - a["bytes_acked"] + hdr * segs_out),
        "rx_bytes": float(b["bytes_received"] - a["bytes_received"] + hdr * segs_in),
        "tx_packets": float(segs_out),
        "rx_packets": float(segs_in),
    }


def net_deltas(
    a: Snapshot, b: Snapshot, device: str, control: Mapping[str, float]
) -> tuple[dict[str, float], dict[str, float]]:
    """(SNMP counter deltas by metric suffix, the device's field deltas less `control`) between two snapshots
    (pure); a field the control connection moved is clamped at 0 after the subtraction."""
    (s0, d0), (s1, d1) = a, b
    snmp = {name: float(s1[key] - s0[key]) for key, name in SNMP_FIELDS.items() if key in s0 and key in s1}
    dev: dict[str, float] = {}
    if device in d0 and device in d1:
        for f in DEV_FIELDS:
            dev[f] = max(0.0, float(d1[device][f] - d0[device][f]) - control.get(f, 0.0))
    return snmp, dev


def figures(
    a: HostEdge,
    b: HostEdge,
    at: tuple[float, float],
    device: str | None,
    family: int = 4,
    control_device: str | None = None,
) -> dict[str, Any]:
    """The window's figures on this host (pure): foreign CPU and the processes that used most, the other runs,
    steal, the agent's CPU, how late each edge was read against its instant and how long each reading took,
    and the underlay counters with the control connection's share taken off where it shares the device."""
    fig = between(a.edge, b.edge)
    wall = max(b.woke - a.woke, 1e-9)
    out: dict[str, Any] = {
        "foreign_cpu_pct": fig["foreign_cpu_pct"],
        "top": fig["top"],
        "runs": fig["runs"],
        "cpu_s": fig["cpu_s"],
        "steal_pct": cpu_shares(a.cpu, b.cpu).get("steal_pct"),
        "agent_cpu_pct": 100.0 * max(0.0, b.edge.harness_s - a.edge.harness_s) / wall,
        "wall_s": wall,
        "late_s": [a.woke - at[0], b.woke - at[1]],
        "read_s": [a.read_s, b.read_s],
    }
    if device and a.net is not None and b.net is not None:
        control = control_overhead(a.control, b.control, family)
        on_device = control_device == device
        snmp, dev = net_deltas(a.net, b.net, device, control if on_device else {})
        out["net"] = {
            "device": device,
            "snmp": snmp,
            "dev": dev,
            "control": {**control, "device": control_device, "subtracted": on_device and bool(control)},
        }
    return out
