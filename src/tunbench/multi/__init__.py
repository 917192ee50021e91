"""Many clients on one host: N client namespaces and one server namespace joined through a bridge (the
"switch", in its own namespace), multi-client tunnel adapters (the `[multi]` table of an adapter file) and
the `clients` (MP-style) and `storm` (C-style) workloads.

Layout: layout.py (names and addresses, pure) -> topology.py (namespaces, veths, bridge) -> fleet.py (one
tunnel server, N tunnel clients) -> icmp.py (readiness: a probe through each client's tunnel) ->
window.py (trimming and summaries, pure) -> clients.py, storm.py (the workloads).
"""

# The workloads registry imports this package's workloads, which import workloads.base: importing the
# registry first makes any import order work (tunbench.multi.trial alone, or tunbench.workloads alone).
import tunbench.workloads  # noqa: F401
