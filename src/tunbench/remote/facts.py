"""What an agent reports about its host: provenance (kernel, CPU, governor, the NIC that carries the
underlay: driver, offloads, MTU), which programs it has, and what its kernel offers a run."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
from pathlib import Path
from typing import Any

from tunbench import metadata
from tunbench.host.cgroup import cgroup_root
from tunbench.host.proc import run_cmd
from tunbench.link.binary import link_binary_or_none

OFFLOADS = ("tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload",
            "rx-checksumming", "tx-checksumming")  # fmt: skip


def host_facts(address: str | None) -> dict[str, Any]:
    """This host's provenance; with `address` (its underlay address), the device that carries it."""
    out: dict[str, Any] = {"host": metadata.collect_host(), "cpu": metadata.collect_cpu()}
    governors = sorted(
        {p.read_text().strip() for p in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor")}
    )
    out["cpu"]["governor"] = ",".join(governors) or "not exposed"
    if address:
        out["nic"] = nic_facts(address)
    return out


def nic_facts(address: str) -> dict[str, Any]:
    """The device that holds `address` (IPv4 or IPv6, in any spelling), its driver, offloads and MTU."""
    res = run_cmd(["ip", "-j", "addr", "show"], check=False, timeout_s=5)
    links: list[dict[str, Any]] = []
    with contextlib.suppress(ValueError):
        links = json.loads(res.stdout or "[]")
    return _nic(address, _holder(links, address))


def _holder(links: list[dict[str, Any]], address: str) -> dict[str, Any] | None:
    """The link of `ip -j addr show` whose addresses include `address` (compared as addresses, so
    2001:2:0:c8::1 and 2001:2:0:c8:0:0:0:1 are one), or None."""
    try:
        want = ipaddress.ip_address(address)
    except ValueError:
        return None
    for link in links:
        for a in link.get("addr_info", []):
            with contextlib.suppress(ValueError):
                if ipaddress.ip_address(str(a.get("local", "")).split("%")[0]) == want:
                    return link
    return None


def _nic(address: str, dev: dict[str, Any] | None) -> dict[str, Any]:
    if dev is None:
        return {"address": address, "device": None, "note": "the address is not on this host's interfaces"}
    name = dev["ifname"]
    nic: dict[str, Any] = {"address": address, "device": name, "mtu": dev.get("mtu")}
    drv = run_cmd(["ethtool", "-i", name], check=False, timeout_s=5) if shutil.which("ethtool") else None
    if drv is not None and drv.returncode == 0:
        info = dict(ln.split(": ", 1) for ln in drv.stdout.splitlines() if ": " in ln)
        nic["driver"] = info.get("driver", "")
        nic["driver_version"] = info.get("version", "")
    off = run_cmd(["ethtool", "-k", name], check=False, timeout_s=5) if shutil.which("ethtool") else None
    if off is not None and off.returncode == 0:
        feats = dict(ln.strip().split(": ", 1) for ln in off.stdout.splitlines()[1:] if ": " in ln)
        nic["offloads"] = {k: feats[k].split()[0] for k in OFFLOADS if k in feats}
    return nic


def tools(programs: list[str]) -> dict[str, bool]:
    return {p: shutil.which(p) is not None for p in programs}


def capabilities() -> dict[str, Any]:
    """What the host's kernel offers a run: root, the TUN device, cgroup CPU accounting, and the two ways to emulate a
    link there (tunbench-link on a TUN pair, or the kernel's netem qdisc)."""
    release = os.uname().release
    netem = Path("/sys/module/sch_netem").exists() or any(
        "sch_netem.ko" in line
        for line in _read(Path("/lib/modules") / release / "modules.dep").splitlines()
        if line.split(":", 1)[0].endswith(("sch_netem.ko", "sch_netem.ko.xz", "sch_netem.ko.zst"))
    )
    return {
        "root": os.geteuid() == 0,
        "tun": Path("/dev/net/tun").exists(),
        "cgroup": (lambda found: f"{found[0]} at {found[1]}" if found else "")(cgroup_root()),
        "netem": netem,
        "tunbench_link": link_binary_or_none() is not None,
    }


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
