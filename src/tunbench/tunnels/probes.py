"""Readiness probes: the tunnel is up when every probe passes, never after a fixed sleep."""

from __future__ import annotations

import re
from pathlib import Path

from tunbench.host.proc import run_cmd

TCP_LISTEN = "0A"
UDP_UNCONN = "07"


def parse_proc_net(text: str, state: str | None) -> set[int]:
    """Local ports in /proc/net/{tcp,tcp6,udp,udp6} text, optionally only sockets in `state` (hex)."""
    ports: set[int] = set()
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 4 or ":" not in fields[1]:
            continue
        if state is not None and fields[3] != state:
            continue
        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def listening_ports(netns: str, proto: str = "tcp") -> set[int]:
    files = [f"/proc/net/{proto}", f"/proc/net/{proto}6"]
    res = run_cmd(["cat", *files], netns=netns, check=False, timeout_s=5)
    state = TCP_LISTEN if proto == "tcp" else None
    ports: set[int] = set()
    # the two files are concatenated: each begins with its own header line
    for chunk in re.split(r"(?m)^(?=\s*sl\s)", res.stdout):
        ports |= parse_proc_net(chunk, state)
    return ports


def port_open(netns: str, port: int, proto: str = "tcp") -> bool:
    return port in listening_ports(netns, proto)


def ping_ok(netns: str, address: str) -> bool:
    argv = ["ping", "-n", "-q", "-c", "1", "-W", "1", address]
    return run_cmd(argv, netns=netns, check=False, timeout_s=3).returncode == 0


def log_matches(log_path: Path, pattern: str) -> bool:
    try:
        return re.search(pattern, log_path.read_text(errors="replace")) is not None
    except OSError:
        return False


def cmd_ok(argv: list[str], netns: str | None, cwd: Path) -> bool:
    return run_cmd(argv, netns=netns, check=False, timeout_s=5, cwd=cwd).returncode == 0
