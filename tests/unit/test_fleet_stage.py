"""The saturated stage of a fleet between hosts (monitor/stage.py fleet_saturation): the server judged on its
host, the clients on each client host, a lost host said as such; the sampler's edge-only thread readings that
feed it (monitor/sampler.py), and what the summary and the trial line say (report/summary.py)."""

from __future__ import annotations

import os
import time
from typing import Any, cast

import pytest

from tunbench.host.cgroup import CpuUsage
from tunbench.metrics import REGISTRY
from tunbench.monitor import stage
from tunbench.monitor.sampler import RoleCost, Sampler
from tunbench.monitor.threads import CpuTime, ThreadTime
from tunbench.report.summary import saturated_text


def host_cost(busy_pct: tuple[float, float], thread_pct: float, comm: str = "wireguard-go") -> RoleCost:
    """A host's readings over 0..10 s: its two CPUs busy at these shares, one thread at this share (threads at
    the edges only, as a client host's agent reads them)."""
    cpus = [(t, {n: CpuTime(busy_pct[n] / 100.0 * t, 0.01 * t) for n in (0, 1)}) for t in (0.0, 5.0, 10.0)]
    threads = [(t, {77: ThreadTime(70, comm, thread_pct / 100.0 * t)}) for t in (0.0, 10.0)]
    return RoleCost(CpuUsage(0.0, 0.0), 0, 1, None, [], threads, cpus=cpus)


def test_each_client_host_has_its_own_stage_and_the_side_names_the_host_that_saturated() -> None:
    server = host_cost((40.0, 30.0), 35.0)
    clients = {"h2": host_cost((50.0, 40.0), 20.0), "h3": host_cost((99.0, 97.0), 60.0)}
    m, said = stage.fleet_saturation(server, "h1", clients, ["h2", "h3"], {}, (1.0, 9.0))
    assert m[stage.CPUS_BUSY.key(role="server")] == pytest.approx(35.0)
    assert m[stage.CPUS_BUSY.key(role="client", on="host.h2.")] == pytest.approx(45.0)
    assert m[stage.CPUS_BUSY.key(role="client", on="host.h3.")] == pytest.approx(98.0)
    assert m[stage.BUSIEST_THREAD.key(role="client", on="host.h3.")] == pytest.approx(60.0)
    assert m[stage.SATURATED_FLAG.key(role="client", on="host.h2.")] == 0.0
    assert m[stage.SATURATED_FLAG.key(role="client", on="host.h3.")] == 1.0
    assert m[stage.SATURATED_FLAG.key(role="client")] == 1.0  # the side: one host saturated
    assert stage.CPUS_BUSY.key(role="client") not in m  # the side's CPUs span hosts: per host only
    assert said["stage"] == {"server": "none", "client": "all cores busy on h3"}
    hosts = cast(dict[str, Any], said["stage_hosts"])
    assert hosts == {"server": {"h1": "none"}, "client": {"h2": "none", "h3": "all cores busy"}}
    assert cast(dict[str, Any], said["threads_hosts"])["client"]["h3"] == [["wireguard-go", 77, 60.0]]
    host_cpus = cast(dict[str, Any], said["host_cpus"])
    assert host_cpus["client"]["h2"]["0"] == [pytest.approx(50.0), pytest.approx(1.0)]
    assert host_cpus["server"]["1"] == [pytest.approx(30.0), pytest.approx(1.0)]
    for key in m:  # every figure is declared (the metric table test scans stored keys)
        assert REGISTRY.find(key) is not None, key
    assert saturated_text(said) == "client on h3: all cores busy"


def test_a_lost_client_host_has_no_figures_and_says_why_never_a_zero() -> None:
    clients = {"h2": host_cost((50.0, 40.0), 20.0), "h4": host_cost((10.0, 10.0), 5.0)}
    lost = {"h4": "connection closed by 198.18.0.4\nmore"}
    m, said = stage.fleet_saturation(None, "h1", clients, ["h2", "h3", "h4"], lost, (1.0, 9.0))
    assert not [k for k in m if ".host.h4." in k or ".host.h3." in k]  # nothing read: nothing, not 0
    assert stage.SATURATED_FLAG.key(role="client") not in m  # none saturated, two unknown: not a 0
    client = cast(dict[str, Any], said["stage_hosts"])["client"]
    assert client == {
        "h2": "none",
        "h3": "not read: h3's agent gave no readings over the phase",
        "h4": "not read: h4 was lost (connection closed by 198.18.0.4)",
    }
    assert cast(dict[str, Any], said["stage"])["client"] == "none (no stage: h3 not read, h4 lost)"
    assert "server" not in cast(dict[str, Any], said["stage"])  # the server had no readings: no stage
    assert saturated_text(said) == ""  # nothing saturated; a lost host is not named as saturated
    # every host read and none saturated: the side's flag is a real 0
    m, _ = stage.fleet_saturation(None, "h1", clients, ["h2"], {}, (1.0, 9.0))
    assert m[stage.SATURATED_FLAG.key(role="client")] == 0.0


def test_one_client_host_is_the_client_side_itself_named_in_the_params() -> None:
    m, said = stage.fleet_saturation(
        host_cost((96.0, 97.0), 99.0, "openvpn"), "h1", {"h2": host_cost((20.0, 20.0), 10.0)}, ["h2"], {}, (0.0, 10.0)
    )
    assert m[stage.CPUS_BUSY.key(role="client")] == pytest.approx(20.0)
    assert said["stage"] == {"server": "all cores busy", "client": "none"}
    assert said["stage_hosts"] == {"server": {"h1": "all cores busy"}, "client": {"h2": "none"}}
    assert saturated_text(said) == "server on h1: all cores busy"
    _, said = stage.fleet_saturation(None, "h1", {}, ["h2"], {"h2": "gone"}, (0.0, 10.0))
    assert said["stage"] == {"client": "not read: h2 was lost (gone)"}


def test_a_client_host_whose_cpus_gave_no_figures_has_no_stage_rather_than_a_crash() -> None:
    blank = host_cost((50.0, 40.0), 20.0)
    blank.cpus[:] = [(t, {}) for t, _ in blank.cpus]  # ticks read, no CPU in them: no figure over the phase
    for hosts in (["h2"], ["h2", "h3"]):
        clients = {"h2": blank, "h3": host_cost((50.0, 40.0), 20.0)}
        m, said = stage.fleet_saturation(None, "h1", clients, hosts, {}, (1.0, 9.0))
        client = cast(dict[str, Any], said["stage_hosts"])["client"]
        assert client["h2"] == "not read: h2's agent gave no readings over the phase"
        assert not [k for k in m if ".host.h2." in k] and stage.CPUS_BUSY.key(role="client") not in m


def test_a_side_figure_moves_onto_a_host_and_nothing_else_does() -> None:
    assert stage.on_host("stage.client.cpus_busy_pct", "h2.lab") == "stage.client.host.h2.lab.cpus_busy_pct"
    spec = REGISTRY.find("stage.client.host.h2.lab.cpus_busy_pct")
    assert spec is stage.CPUS_BUSY
    assert spec.values("stage.client.host.h2.lab.cpus_busy_pct") == {"role": "client", "on": "host.h2.lab."}
    with pytest.raises(ValueError):
        stage.on_host("host_cpu.0.busy_pct", "h2")
    with pytest.raises(ValueError):
        stage.on_host("stage.client.host.h2.cpus_busy_pct", "h3")  # already one host's


def test_edge_threads_are_read_at_the_first_and_last_sample_only_the_cpus_at_every_tick() -> None:
    with Sampler(
        {"clients": (list, None)}, interval_s=0.02, threads=True, edge_threads={"clients": lambda: [os.getpid()]}
    ) as s:
        time.sleep(0.15)
    cost = s.results["clients"]
    assert len(cost.threads) == 2  # the baseline and the final reading
    assert os.getpid() in cost.threads[-1][1]
    assert len(s.cpus) > 2  # the host's CPUs at every tick
    assert cost.processes == 0  # no process sampled: the cgroup's total only


def test_the_summary_warns_per_case_naming_the_host_that_saturated() -> None:
    from tests.unit.report_data import trial
    from tunbench.report.summary import trial_warnings

    _, said = stage.fleet_saturation(
        None,
        "h1",
        {"h2": host_cost((50.0, 40.0), 20.0), "h3": host_cost((99.0, 97.0), 60.0)},
        ["h2", "h3"],
        {},
        (1.0, 9.0),
    )
    hot, calm = trial(1, "wg", 1e6), trial(2, "wg", 1e6, repetition=2)
    hot.params.update(said)
    calm.params["stage_hosts"] = {"client": {"h2": "none", "h3": "none"}}
    (w,) = [w for w in trial_warnings([hot, calm], "wg storm") if w.code == "host-saturated"]
    assert w.message == "wg storm: a host's stage saturated in 1 of 2 trial(s): client on h3: all cores busy"
    assert not [w for w in trial_warnings([calm], "wg storm") if w.code == "host-saturated"]
