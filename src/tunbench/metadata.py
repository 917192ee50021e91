"""Provenance captured once per run: host, kernel, CPU, tool and tunnel versions, and the machine's identity.

Each collector is a small function that returns {} when its source is missing (pyperf-style), so a
missing file never fails a run.

The machine identity (``machine``: host name, CPU model, kernel release and a key derived from them) keys
`tunbench history`: numbers measured on different machines are never put in one series. A run recorded
before the identity was stored gets the same key from its ``host`` and ``cpu`` facts (``machine_of``).
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from tunbench import __version__
from tunbench.host.proc import run_cmd


def collect_host() -> dict[str, Any]:
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "arch": platform.machine(),
        "python": platform.python_version(),
        "tunbench": __version__,
    }


def collect_cpu() -> dict[str, Any]:
    out: dict[str, Any] = {"cores": os.cpu_count(), "physical_cores": psutil.cpu_count(logical=False)}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return out
    if m := re.search(r"^model name\s*:\s*(.+)$", text, re.M):
        out["model"] = m.group(1).strip()
    freq = psutil.cpu_freq()
    if freq is not None:
        out["freq_mhz"] = round(freq.current)
    return out


def collect_memory() -> dict[str, Any]:
    return {"total_bytes": psutil.virtual_memory().total}


def collect_load() -> dict[str, Any]:
    one, five, _ = os.getloadavg()
    return {"load_avg_1min": one, "load_avg_5min": five}


def tool_version(argv: list[str], pattern: str) -> str:
    if shutil.which(argv[0]) is None:
        return "missing"
    res = run_cmd(argv, check=False, timeout_s=10)
    m = re.search(pattern, res.stdout + res.stderr)
    return m.group(1) if m else "unknown"


def collect_tools() -> dict[str, Any]:
    return {
        "iperf3": tool_version(["iperf3", "--version"], r"iperf (\S+)"),
        "iproute2": tool_version(["ip", "-V"], r"iproute2-([0-9.]+)"),
    }


COLLECTORS: dict[str, Callable[[], dict[str, Any]]] = {
    "host": collect_host,
    "cpu": collect_cpu,
    "memory": collect_memory,
    "load": collect_load,
    "tools": collect_tools,
}


def machine_identity(hostname: str, cpu_model: str, kernel: str) -> dict[str, str]:
    """The machine a run measured on: its facts and a stable 12-hex-digit key derived from them (the same
    three facts always give the same key; a new kernel or CPU is a new machine for history's purposes)."""
    text = "\0".join((hostname, cpu_model, kernel))
    return {
        "id": hashlib.sha256(text.encode()).hexdigest()[:12],
        "hostname": hostname,
        "cpu_model": cpu_model,
        "kernel": kernel,
    }


def machine_of(provenance: dict[str, Any]) -> dict[str, str]:
    """The machine identity stored with a run, or the one its host and CPU facts give (older runs)."""
    stored = provenance.get("machine")
    if isinstance(stored, dict) and stored.get("id"):
        return {k: str(stored.get(k) or "") for k in ("id", "hostname", "cpu_model", "kernel")}
    host, cpu = provenance.get("host") or {}, provenance.get("cpu") or {}
    return machine_identity(str(host.get("hostname") or ""), str(cpu.get("model") or ""), str(host.get("kernel") or ""))


def collect() -> dict[str, Any]:
    out = {name: fn() for name, fn in COLLECTORS.items()}
    out["machine"] = machine_of(out)
    return out
