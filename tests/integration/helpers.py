"""Shared helpers for integration tests: run the real CLI, and find anything tunbench left behind."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import psutil

PREFIXED = re.compile(r"^tb[0-9a-f]{6}-")
# the first line `tunbench run` prints: `run tb3fa91c-0123456789abcdef0123 (#12): ...`, the run's uid (its
# identity in the store) beginning with the short prefix its namespaces, links... carry; group 1 is the prefix
RUN_LINE = re.compile(r"^run (tb[0-9a-f]{6})-[0-9a-f]{20} \(#", re.M)
RUN_UID = re.compile(r"^run (tb[0-9a-f]{6}-[0-9a-f]{20}) \(#", re.M)  # group 1: the whole uid
# run prefixes started by this test session (the hermetic fixture checks each of them)
STARTED: set[str] = set()
TOOLS = {
    "tunbench-link",
    "iperf3",
    "wireguard-go",
    "boringtun-cli",
    "openvpn",
    "stunnel",
    "stunnel4",
    "sshd",
    "ssh",
    "socat",
    "irtt",
    "perf",
}


def tunbench(*args: str, timeout: float = 300, check: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess (as a user would), with a wide terminal for the tables."""
    env = {**os.environ, "COLUMNS": "200"}
    res = subprocess.run(
        [sys.executable, "-m", "tunbench", *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    STARTED.update(RUN_LINE.findall(res.stdout))
    if check and res.returncode != 0:
        raise AssertionError(f"tunbench {' '.join(args)} exited {res.returncode}\n{res.stdout}\n{res.stderr}")
    return res


def run_json(tmp_path: Path, *args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess[str], Any]:
    out = tmp_path / "out.json"
    res = tunbench("run", "--db", str(tmp_path / "r.db"), "--json", str(out), *args, timeout=timeout)
    doc = json.loads(out.read_text()) if out.exists() else None
    return res, doc


def _ns_list() -> list[str]:
    res = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return [line.split()[0] for line in res.stdout.splitlines() if line.strip()]


def leftovers(prefix: str | None = None) -> list[str]:
    """Every trace of a tunbench run on this machine (restricted to one run prefix if given)."""

    def ours(name: str) -> bool:
        return bool(PREFIXED.match(name)) and (prefix is None or name.startswith(prefix))

    found = [f"netns {n}" for n in _ns_list() if ours(n)]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    found += [f"link {m}" for m in re.findall(r"^\d+: ([^:@]+)", links, re.M) if ours(m)]
    state = Path("/run/tunbench")
    if state.is_dir():
        found += [f"state {p.name}" for p in state.iterdir() if prefix is None or p.name.lstrip(".").startswith(prefix)]
    for root in (
        Path("/sys/fs/cgroup/cpuacct"),
        Path("/sys/fs/cgroup/cpu"),
        Path("/sys/fs/cgroup/cpuset"),
        Path("/sys/fs/cgroup/unified"),
        Path("/sys/fs/cgroup"),
    ):
        if root.is_dir():
            found += [f"cgroup {p}" for p in root.iterdir() if p.is_dir() and ours(p.name)]
    found += [f"tmp {p}" for p in Path(tempfile.gettempdir()).iterdir() if ours(p.name)]
    wg = Path("/var/run/wireguard")
    if wg.is_dir():
        found += [f"socket {p}" for p in wg.iterdir() if ours(p.name)]
    found += [f"process {pid}: {cmd}" for pid, cmd in _our_processes(ours, orphans=prefix is None)]
    return found


def _netns_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _our_processes(ours: Any, orphans: bool) -> list[tuple[int, str]]:
    """Tool processes inside a tunbench namespace, or naming one; with `orphans`, also any tool process left
    in a namespace that no longer has a name (its namespace was deleted under it: a leak)."""
    root = _netns_inode("/proc/1/ns/net")
    named = {_netns_inode(f"/run/netns/{n}"): n for n in _ns_list()}
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        argv = p.info["cmdline"] or []
        if not argv or os.path.basename(argv[0]) not in TOOLS:
            continue
        cmd = " ".join(argv)
        ino = _netns_inode(f"/proc/{p.info['pid']}/ns/net")
        name = named.get(ino)
        in_ours = ino != root and (ours(name) if name else orphans)
        names_ours = any(ours(w.rsplit("/", 1)[-1]) for w in cmd.split())
        if in_ours or names_ours:
            out.append((p.info["pid"], cmd[:120]))
    return out


def root_namespace_snapshot() -> dict[str, str]:
    """Addresses, routes, rules, nft ruleset and net sysctls of the root namespace (volatile fields removed)."""
    cmds = {
        "addr": ["ip", "-o", "addr"],
        "route4": ["ip", "route", "show", "table", "all"],
        "route6": ["ip", "-6", "route", "show", "table", "all"],
        "rule4": ["ip", "rule"],
        "rule6": ["ip", "-6", "rule"],
        "nft": ["nft", "list", "ruleset"],
    }
    snap = {}
    for key, argv in cmds.items():
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout
        except FileNotFoundError:
            out = "(missing)"
        snap[key] = re.sub(r"(valid_lft|preferred_lft|expires) \S+", r"\1 _", out)
    for key in (
        "ipv4/tcp_rmem",
        "ipv4/tcp_wmem",
        "core/rmem_max",
        "core/wmem_max",
        "ipv4/ip_forward",
        "ipv4/tcp_congestion_control",
    ):
        snap[f"sysctl {key}"] = Path(f"/proc/sys/net/{key}").read_text()
    return snap
