"""`tunbench doctor`: what this machine can do, and what to install for the rest. Checks return values."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from tunbench import workloads
from tunbench.host import HOST_TOOLS
from tunbench.host.cgroup import cgroup_root
from tunbench.tunnels.registry import builtin_names, missing_binaries, parse_ref


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


APT_HINT = (
    "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iperf3 iputils-ping "
    "iproute2 wireguard-go wireguard-tools openvpn openssl openssh-server openssh-client socat stunnel4 irtt"
)


def checks() -> list[Check]:
    out = [
        Check(
            "root",
            os.geteuid() == 0,
            "running as root" if os.geteuid() == 0 else "not root",
            "network namespaces need root: run tunbench with sudo",
        ),
        Check("/dev/net/tun", Path("/dev/net/tun").exists(), "TUN device node", "modprobe tun"),
        Check("network namespaces", Path("/proc/self/ns/net").exists(), "netns support", "a kernel with CONFIG_NET_NS"),
    ]
    cg = cgroup_root()
    out.append(
        Check(
            "cgroup CPU accounting",
            cg is not None,
            f"{cg[0]} at {cg[1]}" if cg else "no cpuacct (v1) or cgroup2 mount found",
            "per-role CPU totals are then sampled only (psutil); mount cgroup2 or cpuacct",
        )
    )
    for tool in HOST_TOOLS:
        path = shutil.which(tool)
        out.append(Check(tool, path is not None, path or "not found", APT_HINT))
    for w in workloads.REGISTRY.values():
        miss = [tool for tool in w.requires if shutil.which(tool) is None]
        detail = (
            "missing " + ", ".join(miss)
            if miss
            else ("uses " + ", ".join(w.requires) if w.requires else "no extra program")
        )
        out.append(Check(f"workload {w.kind}", not miss, detail, APT_HINT))
    from tunbench.link.binary import link_binary_or_none

    link = link_binary_or_none()
    out.append(
        Check(
            "tunbench-link (WAN emulator)",
            link is not None,
            str(link) if link else "not built",
            "make build (needs cargo); only needed for emulated profiles",
        )
    )
    for name in builtin_names():
        ref = parse_ref(name)
        miss = missing_binaries(ref)
        out.append(Check(f"tunnel {name}", not miss, "ok" if not miss else "missing " + ", ".join(miss), APT_HINT))
    return out
