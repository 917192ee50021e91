"""Every declared metric, and the table docs/metrics.md shows of them.

The declarations live next to the code that measures (tunbench.metrics for the ones every layer reads,
monitor/, perf/, the workloads, the fleet set-up); importing the modules of `DECLARING` registers them all.
scripts/metric_table.py writes the table into docs/metrics.md, and tests/unit/test_metric_registry.py checks
that the committed table is what this prints and that no module declares a metric outside `DECLARING`.
"""

from __future__ import annotations

import importlib

from tunbench.metrics import REGISTRY, MetricSpec

DECLARING = (
    "tunbench.metrics.core",
    "tunbench.metrics.latency",
    "tunbench.metrics.link",
    "tunbench.link.fault_record",
    "tunbench.monitor.cost",
    "tunbench.monitor.counters",
    "tunbench.monitor.crosscheck",
    "tunbench.monitor.hostload",
    "tunbench.monitor.interference",
    "tunbench.monitor.irqtime",
    "tunbench.monitor.stage",
    "tunbench.monitor.work",
    "tunbench.remote.watch",
    "tunbench.perf.flamegraph",
    "tunbench.workloads.connect",
    "tunbench.workloads.fleet_metrics",
    "tunbench.workloads.interactive",
    "tunbench.workloads.iperf3",
    "tunbench.workloads.mtu",
    "tunbench.workloads.pps",
    "tunbench.workloads.recovery",
    "tunbench.workloads.udp",
)
"""The modules that declare metrics."""

FAMILY_TEXT = {
    "gate": "compare's main family, at the threshold",
    "wide": "its own family, at the wide threshold",
    "work": "counted work: shown with its verdicts, never gating",
    "info": "stored and reported, not compared",
}


def declared() -> list[MetricSpec]:
    """Every declared metric, by name."""
    for module in DECLARING:
        importlib.import_module(module)
    return list(REGISTRY)


def markdown() -> str:
    """The metric table of docs/metrics.md: one row per declaration, then what the families mean."""
    rows = ["| metric | unit | better | family | what it is |", "|---|---|---|---|---|"]
    for spec in declared():
        text = spec.description.replace("|", "\\|") + "".join(
            f" `{{{name}}}`: {', '.join(values)}." for name, values in spec.choices
        )
        rows.append(f"| `{spec.name}` | {spec.unit or '–'} | {spec.better} | {spec.family} | {text} |")
    rows.append("")
    rows += [f"- **{family}**: {text}" for family, text in FAMILY_TEXT.items()]
    return "\n".join(rows) + "\n"
