"""Where a tunnel spends its CPU: perf recordings of the tunnel processes over the measured window, as
flamegraphs (a runner window hook), with Go symbol names recovered from stripped binaries."""
