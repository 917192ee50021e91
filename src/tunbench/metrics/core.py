"""The metrics of every trial shape: what the traffic moved, the measured window, the bring-up, and the rows
compare derives from them (the tunnel's CPU per bit, its wire overhead). Each side's CPU and RSS are
monitor/cost.py's; the bytes delivered and carried, monitor/counters.py's."""

from __future__ import annotations

from tunbench.metrics.registry import Chart, Format, declare

_CPU_PER_BIT = Format(3, 1e9, " s/Gbit")
_CPU_CHART = Chart("s/Gbit", 1e9)
_CHEAPER = ("cheaper", "costlier")

THROUGHPUT = declare(
    "throughput_bps", "bit/s", "higher", "wide",
    "Goodput at the receiver over the measured window, warm-up excluded; bidir: both directions summed.",
    title="throughput", fmt=Format(rate=True), chart=Chart("Mbit/s", 1e-6), words=("faster", "slower"),
)  # fmt: skip
THROUGHPUT_DIR = declare(
    "throughput_bps.{direction}", "bit/s", "higher", "info",
    "Goodput of one direction over the measured window (None when the trial did not send that way).",
    title="throughput", fmt=Format(rate=True), chart=Chart("Mbit/s", 1e-6),
)  # fmt: skip
RETRANSMITS = declare("retransmits", "count", "lower", "info", "TCP segments the sender retransmitted.")
WINDOW_S = declare(
    "window_s", "s", "none", "info", "The measured window's seconds (the trial's `duration_s` in exports)."
)
TRIAL_WINDOW_S = declare(
    "trial_window_s", "s", "none", "info", "The whole workload call's seconds: connect, warm-up, result exchange."
)
SETUP_S = declare(
    "setup_s", "s", "lower", "info", "Tunnel start to ready, handshake included (a warm block: its first window).",
    title="setup",
)  # fmt: skip
SERIES_T0_S = declare(
    "series_t0_s", "s", "none", "info", "When the per-second series' t = 0 came, after the workload's start."
)

CPU_TOTAL = declare(
    "cpu_s_per_bit", "s/bit", "lower", "gate",
    "The tunnel's CPU seconds per bit of goodput over the measured window, both sides together (`CPU/bit "
    "tunnel`): the main gate where a trial has no count of the bytes delivered.",
    title="CPU/bit tunnel", fmt=_CPU_PER_BIT, chart=_CPU_CHART, words=_CHEAPER,
)  # fmt: skip
CPU_SIDE = declare(
    "cpu_s_per_bit.{role}", "s/bit", "lower", "wide",
    "One side's CPU seconds per bit of goodput over the measured window.",
    title="CPU/bit {role}", fmt=_CPU_PER_BIT, chart=_CPU_CHART, words=_CHEAPER,
)  # fmt: skip
CPU_DELIVERED = declare(
    "cpu_s_per_bit_delivered", "s/bit", "lower", "gate",
    "The tunnel's CPU over whole trials (both sides, the cgroups' count) per bit of payload its traffic "
    "generator delivered over the same test (`CPU/bit delivered`): what the default gate holds.",
    title="CPU/bit delivered", fmt=_CPU_PER_BIT, chart=_CPU_CHART, words=_CHEAPER,
)  # fmt: skip
CPU_CARRIED = declare(
    "cpu_s_per_bit_carried", "s/bit", "lower", "wide",
    "The tunnel's CPU over whole trials per bit the client's underlay link carried (`CPU/bit carried`); "
    "gated under `--gate all` only, as padding would make it cheaper.",
    title="CPU/bit carried", fmt=_CPU_PER_BIT, chart=_CPU_CHART, words=_CHEAPER,
)  # fmt: skip
OVERHEAD = declare(
    "wire_overhead", "ratio", "lower", "wide",
    "Bytes on the client's underlay link, both ways, per payload byte delivered: headers, padding, "
    "retransmissions.",
    title="wire overhead", fmt=Format(suffix="x"), chart=Chart("x"), words=("leaner", "heavier"),
)  # fmt: skip

TEARDOWN_S = declare(
    "clients.teardown_s", "s", "lower", "info", "How long the N-client set-up took to tear down (the fleet shape)."
)
TOPOLOGY_SETUP_S = declare(
    "clients.topology_setup_s", "s", "lower", "info", "How long the N-client set-up took to build (the fleet shape)."
)
KEYS_S = declare("clients.keys_s", "s", "lower", "info", "How long the N clients' keys took to make.")
NETNS_KMEM = declare(
    "clients.netns_kmem_bytes_per_client", "bytes", "lower", "info", "Kernel memory per client namespace."
)
