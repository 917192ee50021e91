"""Host counter parsers and deltas, on a real `cat /proc/net/snmp /proc/net/dev` from a tunbench namespace."""

from __future__ import annotations

from pathlib import Path

from tunbench.monitor.counters import deltas, parse_both, parse_dev, parse_snmp, short_ifname

DATA = Path(__file__).parent.parent / "data"
SAMPLE = (DATA / "proc-net-snmp-dev-client.txt").read_text()


def test_parse_snmp_real_sample() -> None:
    snmp, dev = parse_both(SAMPLE)
    assert snmp[("Udp", "RcvbufErrors")] == 0
    assert snmp[("Tcp", "RetransSegs")] == 0
    assert snmp[("Tcp", "RtoMax")] == 120000
    assert snmp[("Tcp", "MaxConn")] == -1
    assert snmp[("Icmp", "OutEchos")] == 2 and snmp[("IcmpMsg", "OutType8")] == 2
    assert ("UdpLite", "InErrors") in snmp
    # long interface names have no leading space in /proc/net/dev
    assert set(dev) == {"lo", "tbe3ca44-lc"}
    assert dev["tbe3ca44-lc"]["rx_dropped"] == 0


def test_parse_dev_columns() -> None:
    text = (
        "Inter-|   Receive |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes\n"
        "tb123456-tc: 100 2 3 4 5 6 7 8 900 10 11 12 13 14 15 16\n"
        "  eth0:1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"
    )
    dev = parse_dev(text)
    assert dev["tb123456-tc"] == {
        "rx_bytes": 100,
        "tx_bytes": 900,
        "rx_errors": 3,
        "rx_dropped": 4,
        "rx_fifo": 5,
        "tx_errors": 11,
        "tx_dropped": 12,
        "tx_fifo": 13,
        "rx_packets": 2,
        "tx_packets": 10,
    }
    assert "eth0" in dev
    assert parse_snmp(text) == {}


def test_deltas_keep_all_snmp_and_only_nonzero_interfaces() -> None:
    before = parse_both(SAMPLE)
    after_text = SAMPLE.replace("Udp: 0 0 0 0 0 0 0 0 0\n", "Udp: 900 0 25 900 25 3 0 0 0\n").replace(
        "tbe3ca44-lc:     216       3    0    0", "tbe3ca44-lc:     216       3    0    7"
    )
    after = parse_both(after_text)
    m = deltas("server", before, after, prefix="tbe3ca44")
    assert m["counters.server.udp_rcvbuf_errors"] == 25
    assert m["counters.server.udp_in_errors"] == 25
    assert m["counters.server.udp_sndbuf_errors"] == 3
    assert m["counters.server.tcp_retrans_segs"] == 0  # stored even when zero
    assert m["counters.server.dev.lc.rx_dropped"] == 7  # run prefix stripped: comparable across runs
    assert not [k for k in m if ".dev.lo." in k]  # unchanged interfaces are left out


def test_short_ifname() -> None:
    assert short_ifname("tb123456-tc", "tb123456") == "tc"
    assert short_ifname("eth0", "tb123456") == "eth0"


def test_carried_bytes_counts_both_directions_and_a_missing_one_as_zero() -> None:
    from tunbench.monitor.counters import carried_bytes

    m: dict[str, float | None] = {"counters.client.dev.vc.rx_bytes": 5e6, "counters.client.dev.vc.tx_bytes": 3e8}
    assert carried_bytes(m, "vc") == 3.05e8
    assert carried_bytes({"counters.client.dev.vc.tx_bytes": 3e8}, "vc") == 3e8  # deltas keep non-zero ones only
    assert carried_bytes(m, "vs") is None and carried_bytes(m, "vc", role="server") is None
