from __future__ import annotations

from tunbench.host.cgroup import CpuUsage, parse_v2_cpu_stat
from tunbench.tunnels.probes import TCP_LISTEN, parse_proc_net

PROC_NET_TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 0100007F:3B61 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1
   2: 020012C6:1451 010012C6:A2C4 01 00000000:00000000 00:00000000 00000000     0        0 3 1
"""


def test_parse_proc_net_listening_only() -> None:
    assert parse_proc_net(PROC_NET_TCP, TCP_LISTEN) == {5201, 15201}
    assert parse_proc_net(PROC_NET_TCP, None) == {5201, 15201}
    assert parse_proc_net(PROC_NET_TCP, "01") == {5201}


def test_parse_v2_cpu_stat() -> None:
    text = "usage_usec 3500000\nuser_usec 2000000\nsystem_usec 1500000\nnr_periods 0\n"
    assert parse_v2_cpu_stat(text) == CpuUsage(2.0, 1.5)
    assert (CpuUsage(3, 2) - CpuUsage(1, 1)).total_s == 3
