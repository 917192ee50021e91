"""Cost of the tunnel: per-process CPU/RSS sampling (psutil) and exact per-role cgroup totals."""
