"""What a run's purpose implies for its scenario where neither a flag nor the scenario says otherwise: an A/B
comparison to a target places its sides on CPUs of their own, and counted instructions offer iperf3 a fixed
rate. The command decides them from the scenario it read and its flags; the plan is then prepared from the result.
"""

from __future__ import annotations

import os

from tunbench.config.load import with_overrides
from tunbench.config.schema import Scenario
from tunbench.host.cgroup import cpuset_root

INSTRUCTIONS_RATE = "5mbit"
"""The offered rate of iperf3 and udp when instructions are counted and the scenario sets none. Under callgrind
wireguard-go carried about 38 Mbit/s on one 2-vCPU VM (Intel) and 16-18 Mbit/s on another (AMD). There
20 Mbit/s left most trials short of the rate and the gate with no pair, and so did 10 Mbit/s beside two busy
loops (docs/work-gate.md): 5 Mbit/s leaves both builds of an A/B room on a slow box that is also busy. A
trial that still falls short is left out with its pair, and the run names a rate that box sustains
(report.compare.metrics.rate_hint)."""


def split_where_placeable() -> str | None:
    """`split` where this host can place each side on a CPU of its own (2+ CPUs and a cpuset hierarchy
    tunbench may use), else None: the scenario's setting stands."""
    return "split" if (os.cpu_count() or 1) >= 2 and cpuset_root() is not None else None


def ab_cpuset(scenario: Scenario, *, compares: bool, on_hosts: bool) -> str | None:
    """The CPU placement of a run that compares two builds to a target (`compares`: --target-mde) when
    neither --cpuset nor the scenario sets one: `split`, as calibrate places its sides. Without it, A/A
    comparisons here gave false verdicts at 7.8% (7 of 90), with it at 1.4% (1 of 72) (docs/precision.md,
    docs/benchmarks/precision.md). None leaves the scenario's: placement is on this machine only, so never
    where the run's site is elsewhere (`on_hosts`: session.run_site's choice, from --site, --hosts or the
    scenario's [hosts])."""
    if not compares or on_hosts or "cpuset" in scenario.run.model_fields_set:
        return None
    return split_where_placeable()


def with_instructions_rate(scenario: Scenario) -> Scenario:
    """With count_instructions, iperf3 (TCP) and udp at a fixed offered rate (the scenario's, else
    INSTRUCTIONS_RATE): the count per byte then does not depend on how fast each build goes. Any other
    scenario as it is."""
    if not scenario.run.count_instructions:
        return scenario
    for kind in ("iperf3", "udp"):
        if kind not in scenario.workload.kind:
            continue
        current = dict(getattr(scenario.workload, kind, None) or {})
        if not current.get("rate"):
            scenario = with_overrides(scenario, {"workload": {kind: {**current, "rate": INSTRUCTIONS_RATE}}})
    return scenario
