"""Traffic generators. Each has pure argv builders and a pure parse() (tested on committed outputs),
and a Workload class (base.py) the runner drives. REGISTRY maps `kind` names to them."""

from __future__ import annotations

from tunbench.multi.register import WORKLOADS as MULTI_CLIENT_WORKLOADS
from tunbench.workloads.base import Workload
from tunbench.workloads.connect import ConnectWorkload
from tunbench.workloads.iperf3 import Iperf3Workload
from tunbench.workloads.latency import LatencyWorkload
from tunbench.workloads.rrul import RrulWorkload
from tunbench.workloads.udp import UdpSearchWorkload, UdpWorkload

REGISTRY: dict[str, Workload] = {
    w.kind: w
    for w in (
        Iperf3Workload(),
        *(LatencyWorkload(), RrulWorkload(), UdpWorkload(), UdpSearchWorkload(), ConnectWorkload()),
        *MULTI_CLIENT_WORKLOADS,
    )
}


def get(kind: str) -> Workload:
    from tunbench.errors import ConfigError

    if kind not in REGISTRY:
        raise ConfigError(f"unknown workload {kind!r} (known: {', '.join(sorted(REGISTRY))})", key="workload.kind")
    return REGISTRY[kind]
