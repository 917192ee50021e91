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
