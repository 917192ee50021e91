"""The metrics of the many-client workloads (`clients.*`): the clients workload's throughput per protocol and
the storm's bring-up times share one namespace, and the report reads some of both, so they are declared
together here. The fleet shape's own set-up figures (teardown, topology, keys) are tunbench.metrics.core's.

Each figure is declared once, with all the places it is taken: ``{on}`` is "" for all of the fleet's clients
or ``host.<name>.`` for one client host's (``--hosts``), ``{storm}`` "" for the measured storm or ``connect.``
for a reconnect's first one, ``{proto}`` the clients workload's phase. So ``clients.{on}{storm}ready_count``
holds ``clients.ready_count``, ``clients.connect.ready_count`` and ``clients.host.h2.connect.ready_count``.
The workloads build every key from its declaration (``READY_COUNT.key(on=on(host), storm=storm)``), and
`whole` gives the key the report reads, for all the clients of the measured storm."""

from __future__ import annotations

from tunbench.metrics import MetricSpec, declare

# ---- figures of the fleet as a whole (both workloads) ------------------------------------------------------
READY_S = declare(
    "clients.{on}ready_s", "s", "lower", "info",
    "The clients workload's time until the last client was ready (on one host: its last client).",
)  # fmt: skip
CONNECTED = declare("clients.connected", "count", "none", "info", "The clients connected.")
SERVER_RSS_BASE = declare(
    "clients.server_rss_base_bytes", "bytes", "none", "info", "The server's RSS before any client connected."
)
SERVER_RSS_CONNECTED = declare(
    "clients.server_rss_connected_bytes", "bytes", "none", "info", "The server's RSS with every client connected."
)
SERVER_RSS_PER_CLIENT = declare(
    "clients.server_rss_bytes_per_client", "bytes", "lower", "info", "The server's RSS growth per connected client."
)
CLIENT_RSS_MEAN = declare("clients.client_rss_bytes_mean", "bytes", "lower", "info", "A client's mean RSS.")
CPU_PER_CLIENT = declare(
    "clients.server_cpu_s_per_client", "s", "lower", "info",
    "The server's CPU seconds per client (the clients workload: its first protocol's; the storm: per ready "
    "client).",
)  # fmt: skip

# ---- the clients workload, per protocol's phase ------------------------------------------------------------
AGGREGATE = declare("clients.{on}{proto}.aggregate_bps", "bit/s", "higher", "info", "All clients' throughput, summed.")
PER_CLIENT = declare(
    "clients.{on}{proto}.per_client_bps_{stat}", "bit/s", "higher", "info",
    "The distribution of the clients' throughput (a client whose iperf3 failed counts as 0); on one host, the "
    "median only.",
    choices={"stat": ("min", "p10", "p50", "p90", "max", "mean")},
)  # fmt: skip
LOSS_PCT = declare("clients.{on}{proto}.loss_pct", "%", "lower", "info", "The UDP datagrams the clients lost, in %.")
PROTO_JAIN = declare("clients.{on}{proto}.jain", "ratio", "higher", "info", "Jain's fairness index over the clients.")
FAILED = declare("clients.{on}{proto}.failed_clients", "count", "lower", "info", "Clients whose iperf3 failed.")
CLIENTS_CPU_S = declare(
    "clients.{on}{proto}.clients_cpu_s", "s", "none", "info",
    "The tunnel clients' CPU seconds over the whole phase, by their cgroup (on one host: its clients').",
)  # fmt: skip
CLIENTS_CPU_PCT = declare(
    "clients.{proto}.clients_cpu_pct", "%", "none", "info", "The tunnel clients' CPU over the phase, % of a core."
)
WINDOW = declare(
    "clients.{proto}.window_s", "s", "none", "info", "The phase's window: where every kept client was sending."
)
WINDOW_START = declare(
    "clients.{proto}.window_start_s", "s", "none", "info", "When that window began, after the phase's start."
)
LOSS_CLIENTS = declare(
    "clients.{proto}.loss_clients", "count", "none", "info", "The clients whose UDP loss is known (they reported)."
)
OFFERED = declare(
    "clients.{proto}.offered_bps", "bit/s", "none", "info", "The UDP rate offered: N times the per-client rate."
)
PROTO_SERVER_CPU_S = declare(
    "clients.{proto}.server_cpu_s", "s", "lower", "info", "The server's CPU seconds over the phase's window."
)
PROTO_SERVER_CPU_PCT = declare(
    "clients.{proto}.server_cpu_pct", "%", "none", "info", "The server's CPU over the phase's window, % of a core."
)
PROTO_CPU_PER_CLIENT = declare(
    "clients.{proto}.server_cpu_s_per_client", "s", "lower", "info", "The server's CPU seconds per client."
)
PROTO_CPU_PCT_PER_CLIENT = declare(
    "clients.{proto}.server_cpu_pct_per_client", "%", "lower", "info", "The server's CPU per client, % of a core."
)
BITS_PER_CPU_S = declare(
    "clients.{proto}.bps_per_server_cpu_s", "bit/CPU-s", "higher", "info",
    "The bits all clients moved over the window per CPU second the server spent on them.",
)  # fmt: skip
PROTO_SERVER_RSS_PEAK = declare(
    "clients.{proto}.server_rss_peak_bytes", "bytes", "lower", "info", "The server's peak RSS over the phase."
)
HOST_CPU = declare("clients.{proto}.host_cpu_pct", "%", "none", "info", "All CPUs of the host, busy, in %.")
HOST_SATURATED = declare(
    "clients.{proto}.host_cpu_saturated", "flag", "none", "info", "1 when the host's CPUs were over 90% busy."
)
START_SPREAD = declare(
    "clients.{proto}.start_spread_s", "s", "lower", "info", "How far apart the kept clients started."
)
PHASE_MONITORED = declare(
    "clients.{proto}.{monitored}", "", "none", "info",
    "monitor/'s figures of one protocol's phase, under its prefix: each side's CPU (cpu, trial_cpu, cgroup_cpu, "
    "sampled_cpu), RSS peak, processes, the CPU cross-check and the namespaces' counters.",
)  # fmt: skip

# the clients workload's figures of its first protocol, and of the sweep
JAIN = declare("clients.jain", "ratio", "higher", "info", "Jain's fairness index of the headline protocol.")
CPU_PCT_PER_CLIENT = declare(
    "clients.server_cpu_pct_per_client", "%", "lower", "info", "The server's CPU per client, % of a core."
)
CPU_GROWTH = declare(
    "clients.cpu_growth_ratio", "ratio", "lower", "info", "How the server's CPU per client grew over the sweep."
)
RSS_GROWTH = declare(
    "clients.rss_growth_ratio", "ratio", "lower", "info", "How the server's RSS per client grew over the sweep."
)
GROWTH_FROM = declare(
    "clients.{cost}_growth_ratio_vs_n", "count", "none", "info", "The smallest N a growth ratio compares with.",
    choices={"cost": ("cpu", "rss")},
)  # fmt: skip
NONLINEAR = declare(
    "clients.warning_nonlinear", "flag", "none", "info", "1 when a growth ratio passed the non-linear warning."
)

# ---- the storm: each storm, on all the client hosts and on each ------------------------------------------
READY_COUNT = declare("clients.{on}{storm}ready_count", "count", "higher", "info", "The storm's clients that came up.")
SUCCESS_RATIO = declare(
    "clients.{on}{storm}success_ratio", "ratio", "higher", "info", "The share of the storm's clients that came up."
)
FAILED_COUNT = declare(
    "clients.{on}{storm}failed_count", "count", "lower", "info", "The storm's clients that did not come up."
)
READY_P = declare(
    "clients.{on}{storm}ready_p{q}_s", "s", "lower", "info",
    "A percentile of the time from the storm's start to a working tunnel.",
)  # fmt: skip
READY_MAX = declare("clients.{on}{storm}ready_max_s", "s", "lower", "info", "The longest time to a working tunnel.")
READY_FROM_LAUNCH = declare(
    "clients.{on}{storm}ready_from_launch_p{q}_s", "s", "lower", "info",
    "A percentile of the time from a client's own launch to its working tunnel.",
)  # fmt: skip
LAUNCH_SPREAD = declare(
    "clients.{on}{storm}launch_spread_s", "s", "none", "info", "When the last client was launched, after the start."
)
HANDSHAKES_PEAK = declare(
    "clients.{on}{storm}handshakes_per_s_peak", "1/s", "higher", "info", "The most clients ready within one second."
)
HANDSHAKES_PER_S = declare(
    "clients.{on}{storm}handshakes_per_s", "1/s", "higher", "info",
    "Handshakes per second: the clients ready over the time until the last was.",
)  # fmt: skip
START_LATE = declare(
    "clients.host.{host}.{storm}start_late_s", "s", "none", "info",
    "How late one client host started the storm after the agreed instant (this machine's clock).",
)  # fmt: skip

# each storm, on all the client hosts
STORM_S = declare(
    "clients.{storm}storm_s", "s", "none", "info", "The storm's seconds: until every client was ready, or timed out."
)
LOST = declare(
    "clients.lost", "count", "none", "info",
    "Clients lost with their client host mid-trial (--hosts): the trial's figures are the other hosts' clients "
    "(params.clients_lost names each lost host and why).",
)  # fmt: skip
CLIENT_ERRORS = declare(
    "clients.{storm}client_errors", "count", "lower", "info", "Clients whose start failed (none: not written)."
)
SERVER_CPU_S = declare("clients.{storm}server_cpu_s", "s", "lower", "info", "The server's CPU seconds over the storm.")
SERVER_CPU_PCT = declare(
    "clients.{storm}server_cpu_pct", "%", "none", "info", "The server's CPU over the storm, % of a core."
)
SERVER_RSS_PEAK = declare(
    "clients.{storm}server_rss_peak_bytes", "bytes", "lower", "info", "The server's peak RSS over the storm."
)
START_SKEW = declare(
    "clients.{storm}start_skew_s", "s", "lower", "info", "How far apart the client hosts started the storm (--hosts)."
)
START_SKEW_UNCERTAINTY = declare(
    "clients.{storm}start_skew_uncertainty_s", "s", "none", "info", "The clocks' uncertainty on that skew."
)
START_TOLERANCE = declare(
    "clients.{storm}start_tolerance_s", "s", "none", "info", "The storm's start_tolerance_s the skew was held to."
)
STORM_MONITORED = declare(
    "clients.connect.{monitored}", "", "none", "info",
    "monitor/'s figures of a reconnect's first storm, under its prefix: the namespaces' counters.",
)  # fmt: skip

# the measured storm's overload variant
OVERLOAD_S = declare("clients.overload_s", "s", "none", "info", "How long the overload's CPU cap held.")
OVERLOAD_CPU = declare("clients.overload_cpu_pct", "%", "none", "info", "The overload's CPU cap on the server.")
READY_IN_OVERLOAD = declare(
    "clients.ready_during_overload", "count", "higher", "info", "Clients ready while the cap held."
)
RECOVERY_S = declare("clients.recovery_s", "s", "lower", "info", "From the cap's end until the last client was ready.")

PREFIX = CONNECTED.name.partition(".")[0] + "."
"""What every many-client key starts with (``clients.``)."""
FIRST_STORM = STORM_MONITORED.prefix().removeprefix(PREFIX)
"""The ``{storm}`` of a reconnect's first storm (``connect.``)."""
HOST_PREFIX = START_LATE.name.partition("{")[0]
"""What a per-host twin starts with (``clients.host.``), the host's name following."""


def on(host: str | None = None) -> str:
    """The ``{on}`` of a figure: "" for all of the fleet's clients, ``host.<name>.`` for one client host's."""
    return "" if host is None else f"{HOST_PREFIX.removeprefix(PREFIX)}{host}."


def whole(spec: MetricSpec, **values: object) -> str:
    """A figure's key for all of the fleet's clients and the measured storm (``{on}`` and ``{storm}`` empty),
    the other placeholders' values given: ``whole(READY_P, q=50)`` is ``clients.ready_p50_s``."""
    empty = {p: "" for p in ("on", "storm") if p in spec.placeholders}
    return spec.key(**empty, **values)
