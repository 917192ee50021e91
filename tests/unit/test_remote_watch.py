"""Other runs on a run's hosts and the agents' CPU, folded into a trial's interference figures (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from tunbench.remote.watch import merge


def test_a_run_on_a_host_makes_the_window_interfered_and_is_named_with_its_host() -> None:
    metrics: dict[str, float | None] = {"interfered": 0.0, "interference.other_runs": 0.0}
    params: dict[str, Any] = {"interference": ""}
    start = {"h1": {"runs": [], "cpu_s": 1.0, "mono": 100.0}, "h2": {"runs": ["tb00aa11"], "cpu_s": 2.0, "mono": 50.0}}
    end = {"h1": {"runs": [], "cpu_s": 1.02, "mono": 110.0}, "h2": {"runs": ["tb00aa11"], "cpu_s": 2.01, "mono": 60.0}}
    merge(metrics, params, start, end)
    assert metrics["interfered"] == 1.0
    assert metrics["interference.other_runs"] == 1.0
    assert params["interference"] == "another tunbench run live on a host (h2:tb00aa11)"
    assert params["interference_detail"]["remote_runs"] == ["h2:tb00aa11"]
    assert metrics["harness.remote_cpu_pct"] == pytest.approx(0.3)


def test_quiet_hosts_leave_the_verdict_alone() -> None:
    metrics: dict[str, float | None] = {"interfered": 0.0}
    params: dict[str, Any] = {"interference": ""}
    edge = {"h1": {"runs": [], "cpu_s": 1.0, "mono": 0.0}}
    merge(metrics, params, edge, {"h1": {"runs": [], "cpu_s": 1.0, "mono": 1.0}})
    assert metrics["interfered"] == 0.0 and params["interference"] == ""
    assert metrics["harness.remote_cpu_pct"] == 0.0
