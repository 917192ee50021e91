"""The metrics of the many-client workloads (`clients.*`): the clients workload's throughput per protocol and
the storm's bring-up times share one namespace, and the report reads some of both, so they are declared
together here. The fleet shape's own set-up figures (teardown, topology, keys) are tunbench.metrics.core's.

The figures a workload writes under a computed prefix (``clients.``, ``clients.connect.``,
``clients.host.<host>.``) are declared as one family per prefix, with the names the report reads by name
declared one by one."""

from __future__ import annotations

from tunbench.metrics import declare

FIGURE = declare(
    "clients.{figure}", "", "none", "info",
    "A figure of the N-client trial as a whole: ready times and their percentiles, handshakes per second, the "
    "server's CPU and RSS per client, overload and recovery times, growth ratios and warnings.",
)  # fmt: skip
PROTO = declare(
    "clients.{proto}.{figure}", "", "none", "info",
    "A figure of the clients workload per protocol: aggregate and per-client bit rates, fairness (Jain), "
    "loss, the server's and clients' CPU, failed clients, start spread.",
)  # fmt: skip
CONNECT = declare(
    "clients.connect.{figure}", "", "none", "info",
    "The storm's figures of its connect phase (not measured: before the storm itself).",
)  # fmt: skip
HOST = declare(
    "clients.host.{host}.{figure}", "", "none", "info", "A many-client figure of the clients on one client host."
)
HOST_PROTO = declare(
    "clients.host.{host}.{proto}.{figure}", "", "none", "info", "A per-protocol figure on one client host."
)
READY_COUNT = declare("clients.ready_count", "count", "higher", "info", "The storm's clients that came up.")
START_SKEW = declare(
    "clients.start_skew_s", "s", "lower", "info", "How far apart the client hosts started the storm (--hosts)."
)
START_SKEW_UNCERTAINTY = declare(
    "clients.start_skew_uncertainty_s", "s", "none", "info", "The clocks' uncertainty on that skew."
)
START_TOLERANCE = declare(
    "clients.start_tolerance_s", "s", "none", "info", "The storm's start_tolerance_s the skew was held to."
)
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
PHASE_MONITORED = declare(
    "clients.{proto}.{monitored}", "", "none", "info",
    "monitor/'s figures of one protocol's phase, under its prefix: each side's CPU (cpu, trial_cpu, cgroup_cpu, "
    "sampled_cpu), RSS peak, processes, the CPU cross-check and the namespaces' counters.",
)  # fmt: skip

# the clients workload's figures read by name (per protocol's phase, and for the trial)
AGGREGATE = declare("clients.{proto}.aggregate_bps", "bit/s", "higher", "info", "All clients' throughput, summed.")
PER_CLIENT_P50 = declare(
    "clients.{proto}.per_client_bps_p50", "bit/s", "higher", "info", "The median client's throughput."
)
LOSS_PCT = declare("clients.{proto}.loss_pct", "%", "lower", "info", "The UDP datagrams the clients lost, in %.")
PROTO_JAIN = declare("clients.{proto}.jain", "ratio", "higher", "info", "Jain's fairness index over the clients.")
PROTO_CPU_PER_CLIENT = declare(
    "clients.{proto}.server_cpu_s_per_client", "s", "lower", "info", "The server's CPU seconds per client."
)
PROTO_CPU_PCT_PER_CLIENT = declare(
    "clients.{proto}.server_cpu_pct_per_client", "%", "lower", "info", "The server's CPU per client, % of a core."
)
PROTO_SERVER_CPU_PCT = declare(
    "clients.{proto}.server_cpu_pct", "%", "none", "info", "The server's CPU over the phase's window, % of a core."
)
FAILED = declare("clients.{proto}.failed_clients", "count", "lower", "info", "Clients whose iperf3 failed.")
HOST_CPU = declare("clients.{proto}.host_cpu_pct", "%", "none", "info", "All CPUs of the host, busy, in %.")
HOST_SATURATED = declare(
    "clients.{proto}.host_cpu_saturated", "flag", "none", "info", "1 when the host's CPUs were over 90% busy."
)
START_SPREAD = declare(
    "clients.{proto}.start_spread_s", "s", "lower", "info", "How far apart the kept clients started."
)
READY_S = declare("clients.ready_s", "s", "lower", "info", "The time until the last client was ready.")
HOST_READY_S = declare(
    "clients.host.{host}.ready_s", "s", "lower", "info", "The time until one host's last client was ready."
)
CONNECTED = declare("clients.connected", "count", "none", "info", "The clients connected.")
JAIN = declare("clients.jain", "ratio", "higher", "info", "Jain's fairness index of the headline protocol.")
CPU_PER_CLIENT = declare(
    "clients.server_cpu_s_per_client", "s", "lower", "info", "The server's CPU seconds per client (headline)."
)
CPU_PCT_PER_CLIENT = declare(
    "clients.server_cpu_pct_per_client", "%", "lower", "info", "The server's CPU per client, % of a core."
)
CPU_GROWTH = declare(
    "clients.cpu_growth_ratio", "ratio", "lower", "info", "How the server's CPU per client grew over the sweep."
)
RSS_GROWTH = declare(
    "clients.rss_growth_ratio", "ratio", "lower", "info", "How the server's RSS per client grew over the sweep."
)
NONLINEAR = declare(
    "clients.warning_nonlinear", "flag", "none", "info", "1 when a growth ratio passed the non-linear warning."
)

# the storm's figures read by name
READY_P = declare("clients.ready_p{q}_s", "s", "lower", "info", "A percentile of the time to a working tunnel.")
READY_MAX = declare("clients.ready_max_s", "s", "lower", "info", "The longest time to a working tunnel.")
HANDSHAKES_PER_S = declare("clients.handshakes_per_s", "1/s", "higher", "info", "Handshakes per second.")
SERVER_CPU_S = declare("clients.server_cpu_s", "s", "lower", "info", "The server's CPU seconds over the storm.")
OVERLOAD_S = declare("clients.overload_s", "s", "none", "info", "How long the overload's CPU cap held.")
OVERLOAD_CPU = declare("clients.overload_cpu_pct", "%", "none", "info", "The overload's CPU cap on the server.")
READY_IN_OVERLOAD = declare(
    "clients.ready_during_overload", "count", "higher", "info", "Clients ready while the cap held."
)
RECOVERY_S = declare("clients.recovery_s", "s", "lower", "info", "From the cap's end until the last client was ready.")

HOST_CONNECT = declare(
    "clients.host.{host}.connect.{figure}", "", "none", "info", "A connect-phase figure of the storm on one host."
)

PREFIX = FIGURE.name.partition("{")[0]
"""What every many-client key starts with (``clients.``)."""
CONNECT_PREFIX = CONNECT.name.partition("{")[0]
"""What the storm's connect-phase figures start with (``clients.connect.``)."""
HOST_PREFIX = HOST.name.partition("{")[0]
"""What a per-host twin starts with (``clients.host.``), the host's name following."""


def phase_prefix(proto: str) -> str:
    """The prefix of one protocol's phase figures (``clients.udp.``)."""
    return f"{PREFIX}{proto}."
