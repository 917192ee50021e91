"""The network settings a scenario gives tunbench's namespaces: its `[topology]` (MTU, IPv6, congestion
control) and its `[sysctl]` table (the default scenario lifts tcp_rmem/tcp_wmem to 32 MiB), as the one
`TopologySpec` that `run` (execution.py) and `tunbench link shell` both start from. A case's WAN profile
adds its own on top (`TopologySpec.with_profile`)."""

from __future__ import annotations

from tunbench.config.schema import Scenario
from tunbench.topology.build import TopologySpec


def topology_spec(scenario: Scenario) -> TopologySpec:
    """The settings every namespace of the scenario's trials gets before its profile's own."""
    return TopologySpec(
        mtu=scenario.topology.mtu,
        sysctls=dict(scenario.sysctl),
        ipv6=scenario.topology.ipv6,
        congestion_control=scenario.topology.congestion_control,
    )
