"""bencher Metric Format: validated against the documented JSON schema (https://bencher.dev/bmf.json)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from tests.unit.report_data import demo_run, run, trial
from tunbench.report.exporters import bmf


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def validate_bmf(text: str) -> dict[str, Any]:
    """The documented shape: {benchmark: {measure: {"value": number, "lower_value"?: number, "upper_value"?: number}}}.

    Per the bencher docs: value is required; benchmark names are at most 1024 characters and measure
    slugs/names at most 64; JSON numbers only (no NaN/Infinity).
    """
    data = json.loads(text, parse_constant=_reject_constant)
    assert isinstance(data, dict) and data
    for bench, measures in data.items():
        assert isinstance(bench, str) and 0 < len(bench) <= 1024
        assert isinstance(measures, dict) and measures
        for measure, metric in measures.items():
            assert isinstance(measure, str) and 0 < len(measure) <= 64
            assert isinstance(metric, dict) and "value" in metric
            assert set(metric) <= {"value", "lower_value", "upper_value"}
            for v in metric.values():
                assert isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            if "lower_value" in metric or "upper_value" in metric:
                assert metric["lower_value"] <= metric["value"] <= metric["upper_value"]
    return data


def test_demo_run_matches_the_documented_shape() -> None:
    data = validate_bmf(bmf.render([demo_run(with_latency=True)]))
    socat = data["socat/lan/iperf3/up/1-flow"]
    assert socat["throughput-bps"]["value"] == pytest.approx(4e9, rel=0.1)
    assert socat["ratio-to-direct"]["value"] == pytest.approx(4 / 17, rel=0.1)
    assert "cpu-pct-client" in socat and "bits-per-cpu-second-client" in socat
    assert "cpu-pct-server" not in socat  # not measured: left out, never NaN or null
    assert socat["latency-p50-ms"]["value"] == pytest.approx(0.23)
    assert "ratio-to-direct" not in data["direct/lan/iperf3/up/1-flow"]
    assert set(data) >= {"slow/lan/iperf3/up/4-flows", "direct/lan/iperf3/up/4-flows"}


def test_single_repetition_has_no_bounds_and_failed_cases_are_left_out() -> None:
    data = validate_bmf(bmf.render([run([trial(1, "socat", 1e9), trial(2, "other", 0.0, status="failed")])]))
    assert data == {"socat/lan/iperf3/up/1-flow": {"throughput-bps": {"value": 1e9}}}


def test_several_runs_get_distinct_names() -> None:
    data = validate_bmf(bmf.render([demo_run(uid="tba", reps=3), demo_run(uid="tbb", reps=3)]))
    assert "tba/socat/lan/iperf3/up/1-flow" in data and "tbb/socat/lan/iperf3/up/1-flow" in data
