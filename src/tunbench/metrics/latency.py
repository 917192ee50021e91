"""Round-trip latency figures (`latency.*`, milliseconds unless named otherwise): made by the latency and
rrul workloads, read by monitor/'s RTT cross-check, compared by compare. Declared here, below the workloads,
for that reader."""

from __future__ import annotations

from tunbench.metrics.registry import Chart, Format, MetricSpec, declare

_MS = Format(3, 1.0, " ms")
_FASTER = ("faster", "slower")

LATENCY = declare(
    "latency.p{q}_ms", "ms", "lower", "gate", "A percentile of the round-trip time (the latency workload).",
    title="latency p{q}", fmt=_MS, chart=Chart("ms"), words=_FASTER,
)  # fmt: skip
LATENCY_DIR = declare(
    "latency.{way}_p{q}_ms", "ms", "lower", "gate",
    "A percentile of one way's delay (`send`, `receive`) where the clocks allow it (the latency workload).",
    title="latency {way}_p{q}", fmt=_MS, chart=Chart("ms"), words=_FASTER, choices={"way": ("send", "receive")},
)  # fmt: skip
LATENCY_MAX = declare(
    "latency.max_ms", "ms", "lower", "gate", "The largest round-trip time of the latency workload.",
    title="latency max", fmt=_MS, chart=Chart("ms"), words=_FASTER,
)  # fmt: skip
LATENCY_LOSS = declare("latency.loss", "ratio", "lower", "info", "The share of the latency workload's probes lost.")
PHASE = declare(
    "latency.{phase}_p{q}_ms", "ms", "lower", "gate",
    "A percentile of the round-trip time in one of rrul's phases: `idle` before the load, `loaded` under it, "
    "`after` it; `whole` is all three phases' probes together, Flent's summary of its ping series (rrul's "
    "`summary = \"flent\"` only).",
    title="latency {phase}_p{q}", fmt=_MS, chart=Chart("ms"), words=_FASTER,
    choices={"phase": ("idle", "loaded", "after", "whole")},
)  # fmt: skip
INCREASE = declare(
    "latency.increase_p{q}_ms", "ms", "lower", "gate",
    "Loaded minus idle round-trip time at a percentile (rrul); signed, so compared as an absolute difference.",
    title="latency increase_p{q}", fmt=_MS, chart=Chart("ms"), words=_FASTER,
)  # fmt: skip
LOADED_MAX = declare(
    "latency.loaded_max_ms", "ms", "lower", "gate", "The largest round-trip time under rrul's load.",
    title="latency loaded_max", fmt=_MS, chart=Chart("ms"), words=_FASTER,
)  # fmt: skip
LOADED_QUEUE = declare(
    "latency.loaded_queue_ms", "ms", "lower", "gate",
    "The emulator's bottleneck queues' median sojourn, up plus down, under rrul's load.",
    title="latency loaded_queue", fmt=_MS, chart=Chart("ms"), words=_FASTER,
)  # fmt: skip
LOADED_LOSS = declare("latency.loaded_loss", "ratio", "lower", "info", "The share of probes lost under rrul's load.")

STAT = declare(
    "latency.{stat}_ms", "ms", "lower", "gate",
    "The latency workload's smallest and mean round-trip time (compare judges every `latency.*_ms` it finds).",
    title="latency {stat}", fmt=_MS, chart=Chart("ms"), words=_FASTER, choices={"stat": ("min", "mean")},
)  # fmt: skip
CLOCK = declare(
    "latency.clock_{what}_ms", "ms", "none", "info",
    "The two hosts' clock offset (server minus client) and its uncertainty, when one-way figures were asked "
    "for: they describe the measurement, not the tunnel, so compare shows them and never gates on them.",
    title="latency clock_{what}", fmt=_MS, chart=Chart("ms"), words=("lower", "higher"),
    choices={"what": ("skew", "uncertainty")},
)  # fmt: skip
PACKETS_SENT = declare("latency.packets_sent", "count", "none", "info", "The probes the latency workload sent.")
ONE_WAY_WITHHELD = declare(
    "latency.one_way_withheld", "flag", "none", "info",
    "1 when the clocks were not known well enough for one-way figures, which were left out.",
)  # fmt: skip

TIMES = (LATENCY, LATENCY_DIR, LATENCY_MAX, STAT, CLOCK, PHASE, INCREASE, LOADED_MAX, LOADED_QUEUE)
"""Every latency figure in milliseconds (`latency.*_ms`): what compare shows and the exports chart (the clock
figures, family ``info``, shown and never gating)."""


def time_of(key: str) -> MetricSpec | None:
    """The declaration of a stored latency time in ms, None for any other key."""
    return next((spec for spec in TIMES if spec.matches(key)), None)
