"""The multi-host parts that need no second host: clock offset arithmetic, errors across the channel, the
agent's request loop, and the sampler series moved onto the controller's clock."""

from __future__ import annotations

import io
import json

import pytest

from tunbench import errors
from tunbench.remote.clock import Exchange, offset_from
from tunbench.remote.place import role_cost
from tunbench.remote.protocol import RemoteError, build_id, error_answer, error_from


def test_offset_is_taken_from_the_shortest_round_trip() -> None:
    # host clock 5 s ahead; the second exchange is quick and asymmetric-proof within its half round trip
    slow = Exchange(t0_mono=10.0, t0_wall=100.0, t3_mono=10.4, t3_wall=100.4, host_mono=15.3, host_wall=105.3)
    fast = Exchange(t0_mono=11.0, t0_wall=101.0, t3_mono=11.002, t3_wall=101.002, host_mono=16.0015, host_wall=106.0015)
    off = offset_from([slow, fast])
    assert off.rtt_s == pytest.approx(0.002)
    assert off.uncertainty_s == pytest.approx(0.001)
    assert off.mono_s == pytest.approx(5.0005)
    assert abs(off.mono_s - 5.0) <= off.uncertainty_s  # the true offset lies within the stated bound
    assert off.to_local_mono(16.0015) == pytest.approx(11.001)
    with pytest.raises(ValueError):
        offset_from([])


def test_errors_keep_their_type_across_the_channel() -> None:
    e = error_from(error_answer(3, errors.TunnelError("not ready"))["error"], "h2")
    assert isinstance(e, errors.TunnelError) and str(e) == "h2: not ready"
    cmd = error_from(error_answer(4, errors.CommandFailed(["false"], 1, ""))["error"], "h1")
    assert isinstance(cmd, errors.TrialError) and "`false` failed (exit 1)" in str(cmd)
    other = error_from(error_answer(5, KeyError("x"))["error"], "h1")
    assert isinstance(other, RemoteError) and "KeyError" in str(other)


def test_build_id_is_stable_and_short() -> None:
    assert build_id() == build_id() and len(build_id()) == 12


def test_role_cost_series_are_shifted_onto_the_local_clock() -> None:
    d = {
        "cpu": {"user_s": 1.0, "sys_s": 0.5},
        "rss_peak_bytes": 10,
        "processes": 2,
        "cgroup_cpu": None,
        "series": [
            {"t_s": 0.0, "cpu_user_s": 0.0, "cpu_sys_s": 0.0, "rss_bytes": 1, "cg_user_s": None, "cg_sys_s": None}
        ],
    }
    cost = role_cost(d, 0.25)
    assert cost.series[0].t_s == 0.25 and cost.cpu.total_s == 1.5 and cost.cgroup_cpu is None


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="the agent opens a run scope (root)")
def test_agent_answers_each_line_and_survives_bad_requests() -> None:
    from tunbench.remote.agent import serve

    requests = [
        {"id": 1, "op": "hello"},
        {"id": 2, "op": "clock"},
        {"id": 3, "op": "no_such_op"},
        {"id": 4, "op": "tools", "args": {"programs": ["sh", "surely-not-a-program"]}},
    ]
    inp = io.StringIO("".join(json.dumps(r) + "\n" for r in requests) + "not json\n")
    out = io.StringIO()
    serve(inp, out)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [a["id"] for a in answers] == [1, 2, 3, 4, None]
    assert answers[0]["ok"] and answers[0]["result"]["build"] == build_id()
    assert answers[1]["result"]["mono"] > 0
    assert not answers[2]["ok"] and "unknown request" in answers[2]["error"]["message"]
    assert answers[3]["result"] == {"sh": True, "surely-not-a-program": False}
    assert not answers[4]["ok"] and "not a JSON request" in answers[4]["error"]["message"]


def test_host_lines_show_role_nic_and_clock() -> None:
    from tunbench.report.common import host_lines

    prov = {
        "hosts": {
            "h1": {
                "role": "client",
                "address": "10.10.0.1",
                "host": {"kernel": "6.1"},
                "cpu": {"model": "EPYC", "cores": 8, "governor": "performance"},
                "nic": {
                    "device": "eth0",
                    "driver": "mlx5_core",
                    "mtu": 9000,
                    "offloads": {"tcp-segmentation-offload": "on"},
                },
                "clock": {"wall_s": 0.000012, "uncertainty_s": 0.00008},
            }
        }
    }
    (line,) = host_lines(prov)
    assert line == (
        "h1 (client): 10.10.0.1, kernel 6.1, EPYC × 8 (performance), eth0 (mlx5_core) MTU 9000, offloads on: tcp, "
        "clock +0.012 ms ± 0.080 ms"
    )
    assert host_lines({}) == []


def test_one_way_delays_are_corrected_by_the_clock_skew_or_withheld() -> None:
    from tunbench.workloads.irtt import IrttResult, rtt_metrics

    # the server's clock runs 3 ms ahead: irtt sees 13 ms up and 7 ms down for a true 10 / 10
    r = IrttResult(
        rtt_ms=[20.0] * 5, t_s=[0.0] * 5, send_ms=[13.0] * 5, receive_ms=[7.0] * 5, packets_sent=5, packets_received=5
    )
    m = rtt_metrics(r, clock_skew=(0.003, 0.0002))
    assert m["latency.send_p50_ms"] == pytest.approx(10.0) and m["latency.receive_p50_ms"] == pytest.approx(10.0)
    assert m["latency.clock_skew_ms"] == pytest.approx(3.0)
    vague = rtt_metrics(r, clock_skew=(0.003, 0.002))  # ±2 ms on a 10 ms delay: not shown
    assert vague["latency.one_way_withheld"] == 1.0 and "latency.send_p50_ms" not in vague
    assert rtt_metrics(r)["latency.send_p50_ms"] == 13.0  # one host: irtt's own figures
