"""The hosts' window figures folded into a trial's (pure): interference judged and named per host, other
runs on a host, the agents' CPU, and a pair's underlay counters under its roles."""

from __future__ import annotations

from typing import Any

import pytest

from tunbench.monitor.interference import Thresholds
from tunbench.remote.watch import CountRequest, lead_s, merge


def fig(foreign: float = 0.0, steal: float = 0.0, runs: list[str] | None = None, **more: Any) -> dict[str, Any]:
    return {
        "foreign_cpu_pct": foreign,
        "steal_pct": steal,
        "runs": runs or [],
        "top": more.pop("top", []),
        "agent_cpu_pct": more.pop("agent", 0.5),
        "late_s": [0.001, 0.002],
        "read_s": [0.03, 0.03],
        **more,
    }


def local() -> tuple[dict[str, float | None], dict[str, Any]]:
    """What this machine's watch left: its own foreign CPU (not judged with --hosts) and steal."""
    return {"interfered": 0.0, "interference.foreign_cpu_pct": 150.0, "host.steal_pct": 0.3}, {"interference": ""}


def test_a_run_on_a_host_makes_the_window_interfered_and_is_named_with_its_host() -> None:
    metrics, params = local()
    metrics["interference.other_runs"] = 0.0
    merge(metrics, params, {"h1": fig(), "h2": fig(runs=["tb00aa11"])}, Thresholds())
    assert metrics["interfered"] == 1.0
    assert metrics["interference.other_runs"] == 1.0
    assert params["interference"] == "another tunbench run live on a host (h2:tb00aa11)"
    assert params["interference_detail"]["remote_runs"] == ["h2:tb00aa11"]
    assert metrics["harness.remote_cpu_pct"] == pytest.approx(1.0)


def test_foreign_cpu_on_one_host_is_judged_and_named_by_host() -> None:
    metrics, params = local()
    hosts = {"h1": fig(foreign=0.4), "h2": fig(foreign=2.0), "h3": fig(foreign=91.0, top=[("sh", 90.5)])}
    merge(metrics, params, hosts, Thresholds())
    assert metrics["interfered"] == 1.0
    assert params["interference"] == "host h3: foreign CPU 91% of a core (sh 90.5%)"
    assert metrics["interference.host.h3.foreign_cpu_pct"] == 91.0
    assert metrics["interference.host.h1.foreign_cpu_pct"] == 0.4
    # the figure judged is the hosts' (the roles run there); this machine's is kept aside
    assert metrics["interference.foreign_cpu_pct"] == 91.0
    assert params["interference_detail"]["controller"]["foreign_cpu_pct"] == 150.0
    assert params["interference_detail"]["hosts"]["h3"]["late_s"] == [0.001, 0.002]


def test_steal_is_each_hosts_own() -> None:
    metrics, params = local()
    merge(metrics, params, {"h1": fig(steal=0.1), "h2": fig(steal=7.5)}, Thresholds())
    assert params["interference"] == "host h2: steal 7.5%"
    assert metrics["host.steal_pct"] == 7.5
    assert metrics["interference.host.h1.steal_pct"] == 0.1
    assert params["interference_detail"]["controller"]["steal_pct"] == 0.3


def test_a_reason_of_this_machine_is_kept_beside_the_hosts() -> None:
    metrics, params = local()
    params["interference"] = "another tunbench run live (tb0000aa)"
    merge(metrics, params, {"h2": fig(foreign=50.0)}, Thresholds())
    assert params["interference"] == "another tunbench run live (tb0000aa); host h2: foreign CPU 50% of a core"


def test_quiet_hosts_leave_the_verdict_alone() -> None:
    metrics, params = local()
    merge(metrics, params, {"h1": fig(foreign=1.0), "h2": fig()}, Thresholds())
    assert metrics["interfered"] == 0.0 and params["interference"] == ""


def test_no_host_answered_leaves_this_machines_figures() -> None:
    metrics, params = local()
    merge(metrics, params, {}, Thresholds())
    assert metrics["interference.foreign_cpu_pct"] == 150.0 and "interference_detail" not in params


def test_a_pairs_counters_are_its_roles_and_name_their_devices() -> None:
    metrics, params = local()
    net = {
        "device": "eth0",
        "snmp": {"udp_rcvbuf_errors": 3.0},
        "dev": {"rx_bytes": 1000.0, "tx_bytes": 5000.0, "rx_dropped": 0.0},
        "control": {"device": "eth0", "subtracted": True, "rx_bytes": 120.0},
    }
    counts = CountRequest({"h1": ("client",), "h2": ("server",)}, {"h1": "192.0.2.1", "h2": "192.0.2.2"})
    merge(metrics, params, {"h1": fig(net=net), "h2": fig(net={**net, "device": "ens3"})}, Thresholds(), counts)
    assert metrics["counters.client.dev.eth0.tx_bytes"] == 5000.0
    assert metrics["counters.server.dev.ens3.rx_bytes"] == 1000.0
    assert metrics["counters.client.udp_rcvbuf_errors"] == 3.0
    assert "counters.client.dev.eth0.rx_dropped" not in metrics  # zero deltas left out, as locally
    assert counts.devices == {"client": "eth0", "server": "ens3"}
    assert params["interference_detail"]["hosts"]["h1"]["control"]["subtracted"] is True


class _Conn:
    def __init__(self, rtt: float | None) -> None:
        self.clock = None if rtt is None else type("C", (), {"rtt_s": rtt})()


def test_the_lead_covers_the_slowest_hosts_round_trips() -> None:
    assert lead_s([_Conn(0.0001), _Conn(None)]) == 0.02  # type: ignore[list-item]
    assert lead_s([_Conn(0.0001), _Conn(0.05)]) == pytest.approx(0.2)  # type: ignore[list-item]


def test_the_runs_summary_names_the_host_of_the_foreign_cpu() -> None:
    from tunbench.report.summary import interference_causes
    from tunbench.results import TrialRecord

    def trial(foreign: float, why: str) -> TrialRecord:
        metrics: dict[str, float | None] = {"interfered": 1.0, "interference.foreign_cpu_pct": foreign}
        return TrialRecord(1, "wg", "wg", "lan", "iperf3", 1, "up", 1, {"interference": why}, metrics=metrics)

    ts = [
        trial(91.0, "host h3: foreign CPU 91% of a core (sh 90.5%)"),
        trial(40.0, "host h2: foreign CPU 40% of a core"),
    ]
    assert interference_causes(ts) == "foreign CPU up to 91% of a core on hosts h2, h3"
    local = [trial(20.0, "foreign CPU 20% of a core (stress 19%)")]
    assert interference_causes(local) == "foreign CPU up to 20% of a core"
