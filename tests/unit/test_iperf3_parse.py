"""The iperf3 parser on real outputs captured on this machine (tests/data/iperf3-*.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunbench.errors import RetryTrial, TrialError
from tunbench.workloads import iperf3

DATA = Path(__file__).parent.parent / "data"


def load(name: str) -> str:
    return (DATA / name).read_text()


def test_up_uses_receiver_bytes_and_excludes_warmup() -> None:
    text = load("iperf3-up-1flow.json")
    doc = json.loads(text)
    r = iperf3.parse(text, "up")
    assert r.throughput_bps == pytest.approx(doc["end"]["sum_received"]["bits_per_second"])
    assert r.throughput_bps != pytest.approx(doc["end"]["sum_sent"]["bits_per_second"], rel=1e-9)
    assert r.up_bps == r.throughput_bps and r.down_bps is None
    assert r.retransmits == doc["end"]["sum_sent"]["retransmits"]
    # the first interval is the --omit warm-up: not in the series
    omitted = [iv for iv in doc["intervals"] if iv["sum"].get("omitted")]
    assert omitted, "fixture should contain an omitted interval"
    assert len(r.intervals) == len(doc["intervals"]) - len(omitted)
    assert all(p.direction == "up" for p in r.intervals)
    assert r.snd_cwnd_max_bytes and r.snd_cwnd_max_bytes > 0


def test_down_two_flows_has_two_streams() -> None:
    r = iperf3.parse(load("iperf3-down-2flow.json"), "down")
    assert len(r.streams) == 2
    assert {s.direction for s in r.streams} == {"down"}
    assert r.down_bps == r.throughput_bps and r.up_bps is None
    assert sum(s.received_bps for s in r.streams) == pytest.approx(r.throughput_bps, rel=0.02)


def test_bidir_sums_both_directions() -> None:
    text = load("iperf3-bidir-1flow.json")
    doc = json.loads(text)
    r = iperf3.parse(text, "bidir")
    up = doc["end"]["sum_received"]["bits_per_second"]
    down = doc["end"]["sum_received_bidir_reverse"]["bits_per_second"]
    assert r.up_bps == pytest.approx(up) and r.down_bps == pytest.approx(down)
    assert r.throughput_bps == pytest.approx(up + down)
    assert {s.direction for s in r.streams} == {"up", "down"}
    assert {p.direction for p in r.intervals} == {"up", "down"}


def test_error_document_raises_trial_error() -> None:
    with pytest.raises(TrialError, match="unable to connect"):
        iperf3.parse(json.dumps({"start": {}, "intervals": [], "end": {}, "error": "unable to connect"}), "up")


def test_garbage_raises_trial_error() -> None:
    with pytest.raises(TrialError, match="no valid JSON"):
        iperf3.parse("iperf3: error - control socket has closed unexpectedly", "up")


def test_argv() -> None:
    p = iperf3.Iperf3Params(flows=10, direction="down", duration_s=5, omit_s=2)
    argv = iperf3.client_argv("198.19.0.1", 5201, p)
    assert argv[:3] == ["iperf3", "-c", "198.19.0.1"]
    assert "-R" in argv and "--bidir" not in argv
    assert argv[argv.index("-P") + 1] == "10"
    assert argv[argv.index("-O") + 1] == "2"
    assert "-J" in argv
    assert "--bidir" in iperf3.client_argv("x", 1, iperf3.Iperf3Params(direction="bidir"))
    assert p.timeout_s > p.duration_s + p.omit_s


def test_bidir_streams_with_crossed_roles_are_detected() -> None:
    # captured through socat (buffer 2048): the server took the connections in the other order, so both
    # ends of each stream sent (filling the buffers) and neither received a byte
    assert iperf3.parse(load("iperf3-bidir-crossed.json"), "bidir").silent_streams == 2
    assert iperf3.parse(load("iperf3-bidir-1flow.json"), "bidir").silent_streams == 0
    with pytest.raises(RetryTrial):
        iperf3.check_roles(iperf3.parse(load("iperf3-bidir-crossed.json"), "bidir"))
    iperf3.check_roles(iperf3.parse(load("iperf3-bidir-1flow.json"), "bidir"))


def test_a_fixed_tcp_load_is_split_over_the_flows() -> None:
    from pydantic import ValidationError

    from tunbench.workloads.iperf3 import Iperf3Options, Iperf3Params, client_argv

    argv = client_argv("198.18.0.2", 5201, Iperf3Params(flows=4, rate_bps=50e6))
    assert argv[argv.index("-b") + 1] == "50000000" and "-u" not in argv
    assert "-b" not in client_argv("198.18.0.2", 5201, Iperf3Params())
    assert Iperf3Options(rate="200mbit").rate == "200mbit"
    with pytest.raises(ValidationError, match="not a rate"):
        Iperf3Options(rate="fast")
