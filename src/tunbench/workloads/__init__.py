"""Traffic generators. Each has pure argv builders and a pure parse() (tested on committed outputs),
and a Workload class (base.py) the runner drives. REGISTRY maps `kind` names to them."""

from __future__ import annotations

from typing import Any

from tunbench.results import CaseKey
from tunbench.workloads.base import Workload, axes_title
from tunbench.workloads.clients import ClientsWorkload
from tunbench.workloads.connect import ConnectWorkload
from tunbench.workloads.interactive import CrrWorkload, RrWorkload, UdpRrWorkload
from tunbench.workloads.iperf3 import Iperf3Workload
from tunbench.workloads.latency import LatencyWorkload
from tunbench.workloads.mtu import MtuWorkload
from tunbench.workloads.pps import PpsWorkload
from tunbench.workloads.recovery import RecoveryWorkload
from tunbench.workloads.rrul import RrulWorkload
from tunbench.workloads.storm import StormWorkload
from tunbench.workloads.udp import UdpSearchWorkload, UdpWorkload

# one line per workload
REGISTRY: dict[str, Workload[Any, Any]] = {
    w.kind: w
    for w in (
        Iperf3Workload(),
        LatencyWorkload(),
        RrulWorkload(),
        RecoveryWorkload(),
        UdpWorkload(),
        UdpSearchWorkload(),
        PpsWorkload(),
        MtuWorkload(),
        ConnectWorkload(),
        RrWorkload(),
        UdpRrWorkload(),
        CrrWorkload(),
        ClientsWorkload(),
        StormWorkload(),
    )
}


def get(kind: str) -> Workload[Any, Any]:
    from tunbench.errors import ConfigError

    if kind not in REGISTRY:
        raise ConfigError(f"unknown workload {kind!r} (known: {', '.join(sorted(REGISTRY))})", key="workload.kind")
    return REGISTRY[kind]


def case_title(case: CaseKey, *, label: bool = True) -> str:
    """What names a case, everywhere: its tunnel label, its profile, then what its workload says of it
    (Workload.title): 'wireguard-go · lan · up · 1 flow', 'wg · lan · latency'. label=False: without the
    tunnel label ('lan · up · 1 flow'), where the tunnels of one case are shown side by side. A workload
    this version does not know (in an older store) is named by its kind and the axes the case has."""
    w = REGISTRY.get(case.workload)
    if w is not None:
        rest = w.title(case)
    else:
        rest = axes_title(case.workload, ("clients", "variant") if case.clients != 1 else ("flows", "direction"), case)
    cores = [f"{case.cores} core{'s' if case.cores != 1 else ''}"] if case.cores else []
    return " · ".join([*([case.label] if label else []), case.profile, *([rest] if rest else []), *cores])
