"""Readiness probes: the tunnel is up when every probe passes, never after a fixed sleep."""

from __future__ import annotations

import re
from pathlib import Path

from tunbench.host.place import TCP_LISTEN, parse_proc_net
from tunbench.host.place import listening_ports as _ports_in
from tunbench.host.proc import run_cmd

__all__ = ["TCP_LISTEN", "cmd_ok", "listening_ports", "log_matches", "parse_proc_net", "ping_ok", "port_open"]


def listening_ports(netns: str, proto: str = "tcp") -> set[int]:
    res = run_cmd(["cat", f"/proc/net/{proto}", f"/proc/net/{proto}6"], netns=netns, check=False, timeout_s=5)
    return _ports_in(res.stdout, proto)


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
