"""The network settings that change results without anyone asking: what a trial's namespaces really had.

A new namespace inherits the host's TCP congestion control (and default qdisc), and gets kernel defaults
for the socket buffer limits; veth and TUN devices come with their own offloads. `effective_settings()`
reads them all, inside each namespace, so every trial records them (`params["net"]`):

    {"kernel": "6.1.0-18-amd64",
     "client": {"congestion_control": "bbr", "tcp_rmem": "4096 131072 6291456", ..., "default_qdisc": ...,
                "interfaces": {"lo": {"mtu": 65536, "gso": true, "gro": true, "tso": true}, ...}},
     "server": {...},
     "link": {"emulator": "tunbench-link", "devices": {"tb..-lc": {"netns": "client", "mtu": ...}, ...}}}

"link" is there only when the link is emulated. A setting the kernel does not keep per namespace
(net.core.default_qdisc) is the global one, read outside. Reading takes one short-lived thread per namespace (no
subprocess): a few milliseconds.

It also validates a pinned congestion control (`[topology] congestion_control`, a profile's
`congestion_control`) against what the host offers a namespace.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute
from pyroute2.ethtool.ioctl import IoctlEthtool

from tunbench.host.netns import run_in_netns

CONGESTION_KEY = "net.ipv4.tcp_congestion_control"
# recorded name -> sysctl (fixed paths: nothing from the user goes into them)
SYSCTLS = {
    "congestion_control": CONGESTION_KEY,
    "tcp_rmem": "net.ipv4.tcp_rmem",
    "tcp_wmem": "net.ipv4.tcp_wmem",
    "rmem_max": "net.core.rmem_max",
    "wmem_max": "net.core.wmem_max",
    "default_qdisc": "net.core.default_qdisc",
}
# recorded name -> ethtool feature (`ethtool -k` names)
OFFLOADS = {"gso": "tx-generic-segmentation", "gro": "rx-gro", "tso": "tx-tcp-segmentation"}
AVAILABLE_CC = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
ALLOWED_CC = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")


def _read_sysctl(key: str) -> str | None:
    try:
        with open("/proc/sys/" + key.replace(".", "/")) as f:
            return " ".join(f.read().split())
    except OSError:
        return None


def _offloads(ifname: str) -> dict[str, bool | None]:
    """GSO/GRO/TSO of one interface (the ethtool ioctl, through pyroute2); None where it cannot say."""
    out: dict[str, bool | None] = dict.fromkeys(OFFLOADS)
    try:
        eth = IoctlEthtool(ifname)
    except OSError:
        return out
    try:
        features = eth.get_features()
        for name, feature in OFFLOADS.items():
            try:
                out[name] = bool(features[feature])
            except (KeyError, IndexError):
                out[name] = None
    except OSError:
        pass
    finally:
        eth.close()
    return out


def namespace_settings() -> dict[str, Any]:
    """Called inside a namespace (see run_in_netns): its sysctls, and each interface's MTU and offloads."""
    out: dict[str, Any] = {name: _read_sysctl(key) for name, key in SYSCTLS.items()}
    interfaces: dict[str, dict[str, Any]] = {}
    with IPRoute() as ipr:  # a netlink socket opened in this thread: the namespace's links
        for link in ipr.get_links():
            ifname = link.get("ifname")
            if ifname:
                interfaces[ifname] = {"mtu": link.get("mtu")}
    for ifname in sorted(interfaces):
        interfaces[ifname].update(_offloads(ifname))
    out["interfaces"] = {name: interfaces[name] for name in sorted(interfaces)}
    return out


def effective_settings(netns_names: Mapping[str, str], link_devices: Mapping[str, str] | None = None) -> dict[str, Any]:
    """{"kernel": uname -r, <role>: namespace_settings() for each role -> namespace name}; with
    `link_devices` (role -> the emulator's device in that role's namespace) also "link": those devices."""
    out: dict[str, Any] = {"kernel": os.uname().release}
    for role, name in netns_names.items():
        block = run_in_netns(name, namespace_settings)
        for key, sysctl in SYSCTLS.items():
            if block[key] is None:  # not per-namespace (net.core.default_qdisc): the global value applies
                block[key] = _read_sysctl(sysctl)
        out[role] = block
    if link_devices is not None:
        devices = {}
        for role, dev in link_devices.items():
            ns = out.get(role) or {}
            devices[dev] = {"netns": role, **(ns.get("interfaces", {}).get(dev) or {})}
        link: dict[str, Any] = out.get("link") or {}  # the link's own namespace, if it has one
        out["link"] = {**link, "emulator": "tunbench-link", "devices": devices}
    return out


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def check_congestion_control(name: str, available: Path = AVAILABLE_CC, allowed: Path = ALLOWED_CC) -> str:
    """`name` if tunbench's namespaces can use it, else ValueError listing what they can use.

    The kernel lets a namespace other than the root one pick only algorithms in the root namespace's
    net.ipv4.tcp_allowed_congestion_control (EPERM otherwise), and tunbench never changes the root
    namespace, so a name must be both available and allowed."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ValueError(f"{name!r} is not a congestion control name (lower-case letters, digits, _)")
    have = _words(available)
    ok = _words(allowed)
    if name not in have:
        raise ValueError(
            f"{name!r} is not available on this host (tcp_available_congestion_control: {' '.join(have) or '?'}; "
            f"its module may need loading first: modprobe tcp_{name})"
        )
    if name not in ok:
        raise ValueError(
            f"{name!r} is available but not allowed inside namespaces (tcp_allowed_congestion_control: "
            f"{' '.join(ok) or '?'}); tunbench never changes the root namespace: add it there yourself, e.g. "
            f"sysctl -w net.ipv4.tcp_allowed_congestion_control='{' '.join([*ok, name])}'"
        )
    return name
