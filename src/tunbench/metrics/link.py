"""The WAN emulator's figures of a trial (`link.<direction>.*`, up = client -> server): declared here, below
link/ that makes them, because monitor/'s cross-checks read them too. tunbench-link names its own counters
(link/src/stats.rs); the ones tunbench reads by name are declared one by one, the rest as one family."""

from __future__ import annotations

from tunbench.metrics.registry import declare

LINK_COUNTER = declare(
    "link.{direction}.{counter}", "", "none", "info",
    "One of tunbench-link's final counters of a direction, under its own name (delivered, dropped by each "
    "model or by the emulator, lateness and sojourn percentiles: docs/profiles.md).",
)  # fmt: skip
DELIVERED = declare(
    "link.{direction}.delivered_bytes", "bytes", "none", "info",
    "Bytes the emulator delivered in a direction (the byte cross-check's second counter).",
)  # fmt: skip
SOJOURN_P50 = declare(
    "link.{direction}.sojourn_us_p50", "us", "lower", "info",
    "The median time a packet spent in the emulator's bottleneck queue of a direction.",
)  # fmt: skip
LATE_P99 = declare(
    "link.{direction}.late_us_p99", "us", "lower", "info",
    "The 99th percentile of how late the emulator released a packet in a direction (its own accuracy).",
)  # fmt: skip
BOTTLENECK = declare(
    "link.{direction}.bottleneck", "flag", "none", "info",
    "1 when the direction had a bottleneck (a rate or a trace) whose queue the emulator measured.",
)  # fmt: skip
EVENTS_APPLIED = declare(
    "link.{direction}.events_applied", "count", "none", "info", "The profile's events the emulator applied."
)
EVENT_LATE_MAX = declare(
    "link.{direction}.event_late_us_max", "us", "lower", "info", "How late the latest applied event came."
)
QUEUE_TRUNCATED = declare(
    "link.{direction}.queue_series_truncated", "flag", "none", "info",
    "1 when the emulator stopped recording its queue occupancy before the measured window ended.",
)  # fmt: skip
