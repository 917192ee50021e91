"""The request/response workloads (workloads/netperf.py, workloads/interactive.py): netperf's argv, its omni
output parsed from captured runs (tests/data/netperf-*.txt: tunbench runs through direct and wireguard-go on
`lan`, and a TCP_RR with a burst of 4 by hand through `tunbench link shell --profile lan`), the figures under
their declared keys, the CPU per transaction, the measured window, the route through an L4 proxy and compare's
verdicts."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tests.unit.report_data import run, samples, trial
from tunbench import workloads
from tunbench.errors import TrialError
from tunbench.metrics import REGISTRY
from tunbench.report.compare import compare_runs
from tunbench.results import TrialRecord
from tunbench.tunnels.tunnel import Target
from tunbench.units import Window
from tunbench.workloads import interactive as rr
from tunbench.workloads import netperf
from tunbench.workloads.base import Axes

DATA = Path(__file__).resolve().parents[1] / "data"


def captured(name: str) -> netperf.NetperfResult:
    return netperf.parse((DATA / f"netperf-{name}.txt").read_text())


# ---- argv ---------------------------------------------------------------------------------------------


def test_argv_asks_for_the_latencies_and_the_sizes() -> None:
    p = netperf.NetperfParams("TCP_RR", 5, request_bytes=64, response_bytes=1024)
    argv = netperf.client_argv(netperf.Route(Target("198.18.0.2", 5201)), p)
    assert argv[:7] == ["netperf", "-H", "198.18.0.2", "-p", "5201", "-4", "-t"]
    assert argv[argv.index("-t") + 1] == "TCP_RR" and argv[argv.index("-l") + 1] == "5"
    assert "-j" in argv[: argv.index("--")]  # without -j netperf keeps no per-transaction times
    test = argv[argv.index("--") + 1 :]
    assert test[test.index("-k") + 1].split(",") == list(netperf.SELECTORS)
    assert test[test.index("-r") + 1] == "64,1024"
    assert "-b" not in test and "-D" in test


def test_argv_burst_udp_and_ipv6() -> None:
    p = netperf.NetperfParams("UDP_RR", 3, burst=8)
    argv = netperf.client_argv(netperf.Route(Target("2001:2::2", 5201)), p)
    assert "-6" in argv and "-4" not in argv
    test = argv[argv.index("--") + 1 :]
    assert test[test.index("-b") + 1] == "8"
    assert "-D" not in test  # TCP_NODELAY: a TCP option


def test_crr_has_no_burst() -> None:
    with pytest.raises(ValueError, match="no burst"):
        netperf.client_argv(netperf.Route(Target("198.18.0.2", 5201)), netperf.NetperfParams("TCP_CRR", 3, burst=2))


def test_the_workloads_pass_their_options_to_netperf() -> None:
    w = workloads.get("rr")
    opts = w.options({"request_bytes": 100, "response_bytes": 8192, "burst": 3})
    ctx = dataclasses.make_dataclass("Ctx", [("options", object)])(opts)
    p = w.params(ctx, 4)  # type: ignore[attr-defined]
    assert (p.test, p.duration_s, p.request_bytes, p.response_bytes, p.burst) == ("TCP_RR", 4, 100, 8192, 3)
    crr = workloads.get("crr")
    with pytest.raises(ValueError):
        crr.options({"burst": 3})  # a connection per transaction: nothing to keep in flight


# ---- parser -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "protocol"),
    [
        ("tcp_rr-direct", "TCP"),
        ("tcp_rr-wireguard-go", "TCP"),
        ("udp_rr-direct", "UDP"),
        ("udp_rr-wireguard-go", "UDP"),
        ("tcp_crr-direct", "TCP"),
        ("tcp_crr-wireguard-go", "TCP"),
        ("tcp_rr-burst4-lan", "TCP"),
    ],
)
def test_parse_captured_outputs(name: str, protocol: str) -> None:
    text = (DATA / f"netperf-{name}.txt").read_text()
    r = netperf.parse(text)
    kv = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    assert r.transactions_per_s == pytest.approx(float(kv["TRANSACTION_RATE"]))
    assert r.elapsed_s == pytest.approx(float(kv["ELAPSED_TIME"]))
    assert r.protocol == protocol
    lat = r.latency_us
    assert lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
    assert lat["p99"] == pytest.approx(float(kv["P99_LATENCY"]))
    assert r.transactions == pytest.approx(r.transactions_per_s * r.elapsed_s)


def test_percentiles_netperf_could_not_resolve_are_left_out_and_said() -> None:
    # across 100 ms of RTT every transaction falls in netperf's bucket [100, 110) ms, and its interpolation
    # put the percentiles above the largest time it saw: neither that nor the maximum is a p50
    r = captured("udp_rr-direct-wan-50ms")
    assert r.latency_us["p50"] > r.latency_us["max"]  # netperf's own figures, as parsed
    m = rr.result_metrics(r)
    assert m[rr.LATENCY.key(stat="p50")] is None and m[rr.LATENCY_P99.name] is None
    assert m[rr.LATENCY.key(stat="max")] == r.latency_us["max"] and m[rr.LATENCY.key(stat="mean")] is not None
    assert m[rr.LATENCY_STEP.name] == 10_000.0  # a 10 ms bucket: p99 cannot tell 101 ms from 109 ms
    _, unresolved = rr.resolved(r.latency_us)
    assert unresolved == ["p50", "p90", "p99"]
    assert rr.unresolved_note(unresolved, r.latency_us).startswith(
        "p50, p90, p99 not resolved: netperf's estimate fell outside the times it saw (p50 to p99 in one bucket "
        "of its histogram, 10 ms wide)"
    )
    lan = rr.result_metrics(captured("tcp_rr-wireguard-go"))
    assert lan[rr.LATENCY_P99.name] == captured("tcp_rr-wireguard-go").latency_us["p99"]  # inside: unchanged
    assert rr.resolved(captured("tcp_rr-wireguard-go").latency_us)[1] == []


def test_percentiles_in_one_bucket_are_its_interpolation_and_left_out() -> None:
    # a TCP_RR across 100 ms of RTT (the example's run, 2026-11-29): every transaction took 100.2-100.8 ms, and
    # netperf's p50, p90 and p99 were 105.1, 109.1 and 110 ms for every tunnel, the bucket [100, 110) ms
    # interpolated by rank; the maximum (a 200 ms retransmit) put them inside what was seen
    lat = {"min": 100_150.0, "mean": 100_480.0, "p50": 105_106.0, "p90": 109_148.0, "p99": 110_000.0, "max": 200_677.0}
    out, unresolved = rr.resolved(lat)
    assert unresolved == ["p50", "p90", "p99"] and out["p50"] is None and out["p99"] is None
    assert out["max"] == 200_677.0 and out["mean"] == 100_480.0
    assert rr.unresolved_note(unresolved, lat) == (
        "p50, p90, p99 not resolved: netperf's estimates are its interpolation by rank (p50 to p99 in one bucket "
        "of its histogram, 10 ms wide); min, mean and max are exact"
    )
    # the same spread in 1 µs buckets is resolved: 57, 60 and 75 µs are three buckets
    lan = {"min": 40.0, "mean": 58.0, "p50": 57.0, "p90": 60.0, "p99": 75.0, "max": 3_680.0}
    assert rr.resolved(lan) == (lan, [])
    # p99 on the bucket's upper edge is still in it; one step past it is not
    assert rr.one_bucket(345_384.0, 350_000.0) and not rr.one_bucket(345_384.0, 350_001.0)
    assert not rr.one_bucket(99.5, 100.5)


@pytest.mark.parametrize(("value", "step"), [(3.0, 0.1), (13.0, 1.0), (99.0, 1.0), (251.0, 10.0), (109_655.0, 1e4)])
def test_bucket_width_follows_netperfs_histogram(value: float, step: float) -> None:
    assert rr.bucket_us(value) == pytest.approx(step)


def test_parse_reads_burst_sizes_and_retransmits() -> None:
    burst = captured("tcp_rr-burst4-lan")
    assert (burst.burst, burst.request_bytes, burst.response_bytes, burst.retransmits) == (4, 64, 64, 1)
    assert captured("udp_rr-wireguard-go").retransmits is None  # netperf's -1: UDP has none


def test_a_tunnel_costs_transactions_against_direct() -> None:
    # what the captured outputs say, not a bound on any tunnel: through wireguard-go fewer round trips fit
    for test in ("tcp_rr", "udp_rr", "tcp_crr"):
        direct, wg = captured(f"{test}-direct"), captured(f"{test}-wireguard-go")
        assert wg.transactions_per_s < direct.transactions_per_s
        assert wg.latency_us["p50"] > direct.latency_us["p50"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "establish control: are you sure there is a netserver listening on 198.18.0.2 at port 5201?\n",
        "TRANSACTION_RATE=nan\nP99_LATENCY=3\n",
    ],
)
def test_parse_refuses_output_without_a_rate(text: str) -> None:
    with pytest.raises(TrialError, match="TRANSACTION_RATE"):
        netperf.parse(text)


# ---- figures ------------------------------------------------------------------------------------------


def test_result_metrics_are_declared_and_hold_the_test() -> None:
    r = captured("tcp_rr-wireguard-go")
    m = rr.result_metrics(r)
    assert all(REGISTRY.find(k) is not None for k in m), [k for k in m if REGISTRY.find(k) is None]
    assert m[rr.TRANSACTIONS.name] == r.transactions_per_s
    assert m[rr.LATENCY_P99.name] == r.latency_us["p99"]
    assert m[rr.LATENCY.key(stat="p50")] == r.latency_us["p50"]
    assert REGISTRY.find(rr.LATENCY_P99.name) is rr.LATENCY_P99  # p99 gates; the other percentiles do not


def _with_cpu(m: dict[str, float | None], client_s: float | None, server_s: float | None) -> dict[str, float | None]:
    out = dict(m)
    out["window_s"] = 2.0
    for role, cpu in (("client", client_s), ("server", server_s)):
        out[f"processes.{role}"] = 1.0 if cpu is not None else 0.0
        out[f"cpu.{role}.user_s"] = cpu * 0.25 if cpu is not None else 0.0
        out[f"cpu.{role}.sys_s"] = cpu * 0.75 if cpu is not None else 0.0
    return out


def test_cpu_per_transaction_divides_each_sides_cpu_by_the_windows_transactions() -> None:
    m = _with_cpu({rr.TRANSACTIONS.name: 5000.0}, 0.4, 0.6)
    got = rr.cpu_per_transaction(m)
    assert got[rr.CPU_PER_TX_SIDE.key(role="client")] == pytest.approx(1e6 * 0.4 / (5000.0 * 2.0))
    assert got[rr.CPU_PER_TX_SIDE.key(role="server")] == pytest.approx(1e6 * 0.6 / (5000.0 * 2.0))
    assert got[rr.CPU_PER_TX.name] == pytest.approx(1e6 * 1.0 / (5000.0 * 2.0))


def test_no_cpu_per_transaction_without_tunnel_processes_or_a_rate() -> None:
    assert rr.cpu_per_transaction(_with_cpu({rr.TRANSACTIONS.name: 5000.0}, None, None)) == {}  # direct
    assert rr.cpu_per_transaction(_with_cpu({rr.TRANSACTIONS.name: 0.0}, 0.4, 0.6)) == {}
    one = rr.cpu_per_transaction(_with_cpu({rr.TRANSACTIONS.name: 5000.0}, None, 0.6))
    assert set(one) == {rr.CPU_PER_TX_SIDE.key(role="server"), rr.CPU_PER_TX.name}


def test_the_window_starts_after_the_set_up_and_lasts_the_tests_seconds() -> None:
    r = captured("tcp_crr-wireguard-go")
    start, end = rr.measured_window(r, 100.0)
    assert start == pytest.approx(100.0 + 2 * r.latency_us["min"] / 1e6)
    assert end - start == pytest.approx(r.elapsed_s)


def test_crr_estimate_counts_netperfs_exit_lag() -> None:
    window = Window(5, 1)
    case = Axes()
    rr_s = workloads.get("rr").estimate(case, workloads.get("rr").options(None), window)
    crr_s = workloads.get("crr").estimate(case, workloads.get("crr").options(None), window)
    assert crr_s - rr_s == pytest.approx(2 * rr.CrrWorkload.exit_lag_s)


def test_tcp_tests_cross_l4_proxies_and_udp_does_not() -> None:
    for kind in ("rr", "crr"):
        w = workloads.get(kind)
        assert w.layer_problem("l3") == "" and w.layer_problem("l4") == ""
        assert set(w.requires) == {"netperf", "netserver"}
    assert "no UDP" in workloads.get("udp-rr").layer_problem("l4")
    assert workloads.get("udp-rr").layer_problem("l3") == ""


def route_ctx(layer: str, address: str = "127.0.0.1", port: int = 5201, underlay: str = "198.18.0.2") -> Any:
    fields = [("layer", str), ("target", Target), ("server_port", int), ("underlay_server", str)]
    return dataclasses.make_dataclass("Ctx", fields)(layer, Target(address, port), 5201, underlay)


def test_l3_both_connections_go_to_the_target() -> None:
    ctx = route_ctx("l3", "198.19.0.2")
    r = netperf.route(ctx)
    assert r == netperf.Route(Target("198.19.0.2", 5201)) and netperf.control_port(ctx) == 5201
    argv = netperf.client_argv(r, netperf.NetperfParams("TCP_CRR", 3))
    test = argv[argv.index("--") + 1 :]
    assert "-H" not in test and "-P" not in test  # netserver picks the data port


def test_through_a_proxy_control_goes_over_the_underlay_and_data_through_the_proxy() -> None:
    ctx = route_ctx("l4")
    r = netperf.route(ctx)
    assert r.control == Target("198.18.0.2", netperf.CONTROL_PORT) and netperf.control_port(ctx) == netperf.CONTROL_PORT
    argv = netperf.client_argv(r, netperf.NetperfParams("TCP_CRR", 3))
    assert argv[1:6] == ["-H", "198.18.0.2", "-p", str(netperf.CONTROL_PORT), "-4"]
    test = argv[argv.index("--") + 1 :]
    # netserver binds every address on the forwarded port; netperf's connect to 0.0.0.0 reaches the proxy's
    # loopback listener
    assert test[test.index("-H") + 1] == "0.0.0.0,4" and test[test.index("-P") + 1] == ",5201"
    six = netperf.route(route_ctx("l4", "::1", underlay="2001:2::2"))
    argv6 = netperf.client_argv(six, netperf.NetperfParams("TCP_RR", 3))
    assert "-6" in argv6[: argv6.index("--")] and "::,6" in argv6


@pytest.mark.parametrize(
    ("address", "port", "underlay", "says"),
    [
        ("198.18.0.1", 5201, "198.18.0.2", "loopback"),
        ("127.0.0.1", 15201, "198.18.0.2", "port it forwards to"),
        ("127.0.0.1", 5201, "", "underlay address"),
    ],
)
def test_a_proxy_netperf_cannot_cross_is_named(address: str, port: int, underlay: str, says: str) -> None:
    with pytest.raises(TrialError, match=says):
        netperf.route(route_ctx("l4", address, port, underlay))


def test_a_test_with_no_transaction_is_an_error() -> None:
    p = netperf.NetperfParams("TCP_RR", 2)
    empty = netperf.parse("TRANSACTION_RATE=0.000\nELAPSED_TIME=0.00\nPROTOCOL=TCP\n")
    assert "no transaction in 0 s" in netperf.no_transactions(empty, p, "l3")
    assert "L4 proxy" in netperf.no_transactions(empty, p, "l4")
    assert netperf.no_transactions(captured("tcp_rr-direct"), p, "l3") == ""


def test_a_crr_whose_connections_were_not_answered_is_an_error() -> None:
    """netperf's TCP_CRR through socat to a netserver it could not reach (by hand, 2026-11-29): 1,912
    "transactions" a second, none answered; the same through a socat that reached it, every one answered."""
    p = netperf.NetperfParams("TCP_CRR", 1)
    fields = "ELAPSED_TIME=1.00\nRESPONSE_SIZE=1\nPROTOCOL=TCP\n"
    unanswered = netperf.parse("TRANSACTION_RATE=1911.922\nLOCAL_BYTES_RECVD=0\n" + fields)
    assert unanswered.received_bytes == 0.0
    assert "received 0 of their 1912 response bytes" in netperf.no_transactions(unanswered, p, "l4")
    answered = netperf.parse("TRANSACTION_RATE=1871.897\nLOCAL_BYTES_RECVD=1872\n" + fields)
    assert netperf.no_transactions(answered, p, "l4") == ""
    # over an IPv6 underlay the data socket is IPv4: the reason names it (socat's trials there, measured)
    v6 = netperf.route(route_ctx("l4", "127.0.0.1", 5201, "2001:2:0:1::2"))
    why = netperf.no_transactions(unanswered, p, "l4", v6)
    assert "IPv6 underlay" in why and "listens on IPv4 only (0.0.0.0" in why
    v4 = netperf.route(route_ctx("l4", "127.0.0.1", 5201, "198.18.0.2"))
    assert "IPv6" not in netperf.no_transactions(unanswered, p, "l4", v4)
    assert netperf.no_transactions(answered, p, "l4", v6) == ""


def test_the_builtin_proxies_listen_on_the_port_they_forward_to() -> None:
    from tunbench.tunnels import tunnel

    assert tunnel.PROXY_PORT == tunnel.IPERF_PORT


# ---- compare ------------------------------------------------------------------------------------------


def rr_trials(label: str, rates: list[float], p99_us: float, cpu_s: float) -> list[TrialRecord]:
    out = []
    for i, rate in enumerate(rates):
        base = trial(i + 1, label, 0.0, repetition=i + 1, cpu_client_s=cpu_s, cpu_server_s=cpu_s)
        m = {k: v for k, v in base.metrics.items() if not k.startswith("throughput_bps")}
        m[rr.TRANSACTIONS.name] = rate
        m[rr.LATENCY_P99.name] = p99_us * (1.0 + 0.002 * i)
        m.update(rr.cpu_per_transaction(m))
        out.append(dataclasses.replace(base, workload="rr", direction="-", metrics=m, series={}, streams=[]))
    return out


def test_compare_judges_transactions_p99_and_cpu_per_transaction() -> None:
    a = run(rr_trials("wg", samples(8000.0, 8, 0.01, seed=1), 250.0, 0.4), uid="tba")
    b = run(rr_trials("wg", samples(6000.0, 8, 0.01, seed=2), 300.0, 0.4), rid=2, uid="tbb")
    res = compare_runs(a, b, threshold=0.03)
    rows = {r.metric.name: r for r in res.rows}
    for name in (rr.TRANSACTIONS.name, rr.LATENCY_P99.name, rr.CPU_PER_TX.name):
        assert name in rows, sorted(rows)
        assert rows[name].gated
    assert rows[rr.TRANSACTIONS.name].verdict_text == "slower"
    assert rows[rr.LATENCY_P99.name].verdict_text == "slower"
    # the same CPU seconds over fewer transactions: each costs more
    assert rows[rr.CPU_PER_TX.name].verdict_text == "costlier"
    assert res.exit_code != 0
    # rr has no throughput_bps: that is not a side without good trials
    assert not [n for n in res.notes if "no successful trials" in n], res.notes


def test_compare_still_names_a_side_without_good_trials() -> None:
    a = run(rr_trials("wg", samples(8000.0, 6, 0.01, seed=1), 250.0, 0.4), uid="tba")
    failed = [dataclasses.replace(t, status="failed") for t in rr_trials("wg", [0.0] * 6, 250.0, 0.4)]
    res = compare_runs(a, run(failed, rid=2, uid="tbb"), threshold=0.03)
    assert [n for n in res.notes if "no successful trials on B" in n] != []


# ---- the HTML report ----------------------------------------------------------------------------------


def test_the_report_charts_each_cases_transaction_times_on_a_log_axis() -> None:
    from tunbench.report.html.transactions import fig_transactions, transaction_times

    wg = rr_trials("wg", [8000.0, 8100.0, 7900.0], 250.0, 0.4)
    for t in wg:
        t.metrics.update({rr.LATENCY.key(stat="p50"): 100.0, rr.LATENCY.key(stat="max"): 4000.0})
    bulk = trial(9, "wg", 1e9)  # an iperf3 trial: no transaction times
    data = transaction_times([*wg, bulk])
    assert list(data) == [wg[0].case]
    assert data[wg[0].case]["p99"] == pytest.approx(250.0 * 1.002)  # the median of the three
    fig = fig_transactions([*wg, bulk], {"wg": "#123456"})
    assert fig is not None and fig.layout.yaxis.type == "log"
    (line,) = fig.data
    assert list(line.x) == ["p50", "p99", "max"]
    assert fig_transactions([bulk], {}) is None
