"""A client whose iperf3 failed counts as a client that received 0: the aggregate, the distribution,
Jain's index and the per-client server cost all divide by the same N."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tunbench.host.cgroup import CpuUsage
from tunbench.host.ledger import Ledger
from tunbench.host.place import LocalPlace
from tunbench.monitor.sampler import RoleCost, RoleSample
from tunbench.results import TrialRecord
from tunbench.sites.base import SampledCost
from tunbench.workloads.clients import ClientsWorkload, Timing
from tunbench.workloads.fleet_options import ClientsOptions


def _client_json(bytes_per_s: float) -> str:
    ivs = [{"sum": {"start": float(t), "end": float(t + 1), "bytes": bytes_per_s}} for t in range(10)]
    return json.dumps({"intervals": ivs, "end": {}})


def test_a_failed_client_counts_as_zero(tmp_path: Path) -> None:
    n = 4
    for i in range(n - 1):  # client 3 left no output: its iperf3 failed
        (tmp_path / f"iperf-tcp-c{i}.json").write_text(_client_json(1e6))
    server = RoleCost(CpuUsage(1, 1), 0, 1, None, series=[RoleSample(0, 0, 0, 0), RoleSample(20, 2, 2, 0)])
    sampler = SampledCost(results={"server": server, "clients": RoleCost(CpuUsage(0, 0), 0, 0, None)}, wall_s=20.0)
    place = LocalPlace(None, Ledger.__new__(Ledger), tmp_path)  # reads the reports from tmp_path
    mt: Any = SimpleNamespace(
        layout=SimpleNamespace(clients=n),
        fleet=SimpleNamespace(places=SimpleNamespace(client=lambda i: place)),
        host_of=dict,  # every client on this machine
        lost_clients=dict,
    )
    rec = TrialRecord(1, "wireguard-go", "wireguard-go", "lan", "clients", 1, "down", 0, {}, clients=n)
    timing = Timing({i: 0.0 for i in range(n)}, {i: 10.0 for i in range(n)}, 1.0, 5.0, 1.0)
    ClientsWorkload()._summarize(mt, rec, ClientsOptions(), "tcp", "down", timing, sampler, True)
    m = rec.metrics
    assert m["clients.tcp.failed_clients"] == 1.0
    assert m["throughput_bps"] == pytest.approx(3 * 8e6)
    assert m["clients.jain"] == pytest.approx(0.75)  # three equal shares and a zero: 9 / (4 * 3)
    per_client = dict(rec.series["clients.tcp.per_client_bps"])
    assert sorted(per_client) == [0.0, 1.0, 2.0, 3.0] and per_client[3.0] == 0.0


def test_a_lost_client_hosts_clients_are_not_counted(tmp_path: Path) -> None:
    """Clients 2 and 3 were on h4, lost mid-trial: the denominators are the two clients left, neither failed."""
    for i in range(2):
        (tmp_path / f"iperf-tcp-c{i}.json").write_text(_client_json(1e6))
    server = RoleCost(CpuUsage(1, 1), 0, 1, None, series=[RoleSample(0, 0, 0, 0), RoleSample(20, 2, 2, 0)])
    sampler = SampledCost(results={"server": server, "clients": RoleCost(CpuUsage(0, 0), 0, 0, None)}, wall_s=20.0)
    place = LocalPlace(None, Ledger.__new__(Ledger), tmp_path)
    mt: Any = SimpleNamespace(
        layout=SimpleNamespace(clients=4),
        fleet=SimpleNamespace(places=SimpleNamespace(client=lambda i: place)),
        host_of=lambda: {0: "h2", 1: "h2", 2: "h4", 3: "h4"},
        lost_clients=lambda: {"h4": "h4: the connection closed"},
    )
    rec = TrialRecord(1, "wireguard-go", "wireguard-go", "lan", "clients", 1, "down", 0, {}, clients=4)
    timing = Timing({i: 0.0 for i in range(4)}, {i: 10.0 for i in range(4)}, 1.0, 5.0, 1.0)
    ClientsWorkload()._summarize(mt, rec, ClientsOptions(), "tcp", "down", timing, sampler, True)
    m = rec.metrics
    assert m["clients.tcp.failed_clients"] == 0.0
    assert m["throughput_bps"] == pytest.approx(2 * 8e6)
    assert m["clients.jain"] == pytest.approx(1.0)
    assert sorted(dict(rec.series["clients.tcp.per_client_bps"])) == [0.0, 1.0]
    assert "clients.host.h4.tcp.aggregate_bps" not in m and m["clients.host.h2.tcp.aggregate_bps"] > 0
