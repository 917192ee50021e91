"""Provenance captured once per run: host, kernel, CPU, tool and tunnel versions.

Each collector is a small function that returns {} when its source is missing (pyperf-style), so a
missing file never fails a run.
"""

from __future__ import annotations

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


def collect() -> dict[str, Any]:
    return {name: fn() for name, fn in COLLECTORS.items()}
