"""Listening ports in a namespace of this machine, for code that has a namespace name rather than a Place
(the switched fleet, the link self-test); adapters' readiness probes go through Place (tunnels/steps.py)."""

from __future__ import annotations

from tunbench.host.place import TCP_LISTEN, parse_proc_net
from tunbench.host.place import listening_ports as _ports_in
from tunbench.host.proc import run_cmd

__all__ = ["TCP_LISTEN", "listening_ports", "parse_proc_net", "port_open"]


def listening_ports(netns: str, proto: str = "tcp") -> set[int]:
    res = run_cmd(["cat", f"/proc/net/{proto}", f"/proc/net/{proto}6"], netns=netns, check=False, timeout_s=5)
    return _ports_in(res.stdout, proto)


def port_open(netns: str, port: int, proto: str = "tcp") -> bool:
    return port in listening_ports(netns, proto)
