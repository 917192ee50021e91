"""The in-run cross-checks, iperf3's generator figures and the measured window (pure functions)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tunbench.errors import TrialError
from tunbench.monitor import crosscheck
from tunbench.workloads import iperf3

DATA = Path(__file__).resolve().parents[1] / "data"


def test_cpu_check_tolerance_is_5_percent_or_50_ms() -> None:
    assert crosscheck.cpu_check(10.0, 10.45) == pytest.approx((0.45, True))
    assert not crosscheck.cpu_check(10.0, 10.6)[1]
    assert crosscheck.cpu_check(0.2, 0.24)[1]  # small figures: 50 ms absolute
    assert not crosscheck.cpu_check(0.2, 0.3)[1]


def test_bytes_check_bounds() -> None:
    payload, upper = 1e9, 1.2e9
    assert crosscheck.bytes_check(payload, upper, 1.05e9)[1]
    assert not crosscheck.bytes_check(payload, upper, 0.9e9)[1]  # the receiver counted bytes the link never saw
    assert not crosscheck.bytes_check(payload, upper, 2e9)[1]  # far more on the wire than was sent
    assert crosscheck.bytes_check(payload, upper, 1.5e9)[0] == pytest.approx(1.25)  # wire bytes per sent byte
    ratio, ok = crosscheck.bytes_check(0.0, 0.0, 10.0)
    assert math.isnan(ratio) and ok


def test_byte_checks_pick_the_receiving_namespace_and_the_emulator() -> None:
    m: dict[str, float | None] = {
        "iperf3.bytes.up": 1e9,
        "iperf3.sent_bytes_total.up": 1.2e9,
        "counters.server.dev.vs.rx_bytes": 1.3e9,
        "counters.client.dev.vc.rx_bytes": 5e7,  # the ACKs' side: not the receiver of `up`
        "link.up.delivered_bytes": 0.5e9,  # the emulator saw half: a disagreement
    }
    keys = iperf3.GENERATOR.byte_keys()
    out = crosscheck.byte_checks(m, {"client": "vc", "server": "vs"}, emulated=True, generator=keys)
    assert out["check.bytes.up.dev.ok"] == 1.0 and out["check.bytes.up.dev.ratio"] == pytest.approx(1.3 / 1.2)
    assert out["check.bytes.up.link.ok"] == 0.0
    assert "check.bytes.down.dev.ok" not in out
    assert crosscheck.failed_checks({**m, **out}) == ["check.bytes.up.link"]


def test_parse_records_generator_cpu_and_bytes() -> None:
    r = iperf3.parse((DATA / "iperf3-up-1flow.json").read_text(), "up")
    doc = json.loads((DATA / "iperf3-up-1flow.json").read_text())
    cpu = doc["end"]["cpu_utilization_percent"]
    assert r.cpu_client_pct == cpu["host_total"] and r.cpu_server_pct == cpu["remote_total"]
    assert r.received_bytes == {"up": doc["end"]["sum_received"]["bytes"]}
    omitted = sum(iv["sum"]["bytes"] for iv in doc["intervals"] if iv["sum"]["omitted"])
    assert omitted > 0
    assert r.sent_bytes_total["up"] == omitted + doc["end"]["sum_sent"]["bytes"]
    m = iperf3.generator_metrics(r)
    assert m["iperf3.cpu.client_pct"] == cpu["host_total"] and m["iperf3.generator_bound"] == 0.0
    # the stored names stay what older stores hold (the report reads them through Workload.generator)
    assert m["iperf3.bytes.up"] == r.received_bytes["up"] and m["iperf3.sent_bytes_total.up"] > m["iperf3.bytes.up"]
    g = iperf3.Iperf3Workload.generator
    assert g is not None and set(m) == {g.bound, *g.cpu, *g.byte_keys()["up"]}


def test_generator_bound_at_90_percent_of_a_core() -> None:
    doc = json.loads((DATA / "iperf3-up-1flow.json").read_text())
    doc["end"]["cpu_utilization_percent"]["host_total"] = 93.0
    r = iperf3.parse(json.dumps(doc), "up")
    assert iperf3.generator_metrics(r)["iperf3.generator_bound"] == 1.0


def test_bidir_without_the_reverse_sum_is_a_failed_trial() -> None:
    doc = json.loads((DATA / "iperf3-bidir-1flow.json").read_text())
    del doc["end"]["sum_received_bidir_reverse"]
    with pytest.raises(TrialError, match="sum_received_bidir_reverse"):
        iperf3.parse(json.dumps(doc), "bidir")


def test_measured_window_ends_before_the_result_exchange() -> None:
    r = iperf3.parse((DATA / "iperf3-up-1flow.json").read_text(), "up")
    launched, exited = 100.0, 103.5
    start, end = iperf3.measured_window(r, launched, exited)
    assert end == pytest.approx(exited - 2 * (r.min_rtt_s or 0.0))
    assert end - start == pytest.approx(r.duration_s)
    # a window can never begin before the client was launched
    assert iperf3.measured_window(r, 102.9, 103.0)[0] == 102.9


def test_case_warnings_for_a_bound_generator_and_a_failed_check() -> None:
    from tunbench.report.summary import trial_warnings
    from tunbench.results import TrialRecord

    def trial(**metrics: float) -> TrialRecord:
        return TrialRecord(1, "direct", "direct", "lan", "iperf3", 1, "up", 0, {}, metrics=dict(metrics))

    calm = trial(**{"iperf3.generator_bound": 0.0, "iperf3.cpu.client_pct": 40.0, "check.cpu.client.ok": 1.0})
    assert trial_warnings([calm], "direct") == []
    bound = trial(**{"iperf3.generator_bound": 1.0, "iperf3.cpu.client_pct": 93.0, "check.bytes.up.dev.ok": 0.0})
    codes = {w.code: w for w in trial_warnings([calm, bound], "direct")}
    assert "93%" in codes["generator-bound"].message and "1 of 2" in codes["generator-bound"].message
    assert "check.bytes.up.dev" in codes["cross-check"].message


def test_byte_checks_that_did_not_run_are_not_checked_not_passed() -> None:
    """Issue 28 #15: the byte cross-checks do not run on a --hosts run; the report says so, in every format,
    instead of showing nothing (which reads as agreed)."""
    from tests.unit.report_data import run
    from tunbench.report import terminal
    from tunbench.report.exporters import json as json_format
    from tunbench.report.exporters import markdown
    from tunbench.report.html import tables
    from tunbench.report.summary import summarize_trials, trial_warnings
    from tunbench.results import TrialRecord

    def trial(seq: int, **metrics: float) -> TrialRecord:
        m = {"throughput_bps": 1e9, "throughput_bps.up": 1e9, "iperf3.bytes.up": 2.5e8, **metrics}
        return TrialRecord(seq, "direct", "direct", "lan", "iperf3", 1, "up", seq, {}, metrics=m)

    checked = trial(1, **{"check.bytes.up.dev.ok": 1.0, "check.bytes.up.dev.ratio": 1.01})
    remote = trial(2)  # iperf3's bytes, and no check.bytes.*: a --hosts trial
    assert trial_warnings([checked], "direct up") == []
    (w,) = trial_warnings([checked, remote], "direct up")
    assert w.code == "not-cross-checked" and "bytes not cross-checked in 1 of 2 trial(s)" in w.message
    latency = TrialRecord(3, "direct", "direct", "lan", "latency", 1, "-", 0, {}, metrics={"latency.p50_ms": 1.0})
    assert trial_warnings([latency], "direct") == []  # no bytes, nothing to check
    trials = [trial(i, **{"check.bytes.up.dev.ok": 1.0}) if i == 1 else trial(i) for i in range(1, 6)]
    summaries = summarize_trials(trials)
    assert any("bytes not cross-checked in 4 of 5" in line for line in terminal.warning_lines(summaries))
    assert "byte cross-checks not run (not checked, not passed)" in tables.warnings_html(summaries)
    assert "bytes not cross-checked in 4 of 5" in markdown.render_run(run(trials))
    assert '"code": "not-cross-checked"' in json_format.render(run(trials))


def test_the_loaded_rtt_is_taken_apart_into_idle_queue_and_residual() -> None:
    from tunbench.monitor.crosscheck import rtt_checks

    m = {
        "latency.idle_p50_ms": 20.35,
        "latency.loaded_p50_ms": 74.8,
        "link.up.sojourn_us_p50": 51_000.0,
        "link.down.sojourn_us_p50": 1_200.0,
        "link.up.bottleneck": 1.0,
        "link.down.bottleneck": 1.0,
    }
    out = rtt_checks(m)
    assert out["latency.loaded_queue_ms"] == pytest.approx(52.2)
    assert out["check.rtt.residual_ms"] == pytest.approx(74.8 - 20.35 - 52.2)
    assert out["check.rtt.ok"] == 1.0
    assert rtt_checks({**m, "link.up.sojourn_us_p50": 1_000.0})["check.rtt.ok"] == 0.0  # 50 ms unexplained
    assert rtt_checks({"latency.idle_p50_ms": 1.0, "latency.loaded_p50_ms": 2.0}) == {}
    # a delay-only link has no emulated queue: the residual is stored, not judged
    assert "check.rtt.ok" not in rtt_checks({**m, "link.down.bottleneck": 0.0})


def test_generator_figures_are_read_by_the_names_the_workload_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    """The report and the byte cross-checks know no workload's metric names: a workload whose generator
    stores its figures under other names gets the same warnings and checks (issue 29)."""
    from tunbench import workloads
    from tunbench.report.summary import trial_warnings
    from tunbench.results import TrialRecord
    from tunbench.workloads.base import Generator

    gen = Generator(
        "blaster", "bl.bound", ("bl.cpu.tx", "bl.cpu.rx"), "use two", "bl.{direction}.got", "bl.{direction}.sent"
    )

    class Blaster(iperf3.Iperf3Workload):
        kind = "blaster"
        generator = gen

    monkeypatch.setitem(workloads.REGISTRY, "blaster", Blaster())
    m = {"bl.up.got": 1e9, "bl.up.sent": 1.2e9, "counters.server.dev.vs.rx_bytes": 1.3e9}
    out = crosscheck.byte_checks(m, {"client": "vc", "server": "vs"}, emulated=False, generator=gen.byte_keys())
    assert out == {"check.bytes.up.dev.ratio": pytest.approx(1.3 / 1.2), "check.bytes.up.dev.ok": 1.0}

    def trial(seq: int, **metrics: float) -> TrialRecord:
        return TrialRecord(seq, "direct", "direct", "lan", "blaster", 1, "up", seq, {}, metrics=dict(metrics))

    bound = trial(1, **{"bl.bound": 1.0, "bl.cpu.rx": 97.0, "bl.up.got": 1e9})
    codes = {w.code: w for w in trial_warnings([bound, trial(2, **{"bl.bound": 0.0})], "direct up")}
    assert codes["generator-bound"].message.startswith("direct up: blaster itself used up to 97% of a core in 1 of 2")
    assert codes["generator-bound"].fix == "use two"
    assert "bytes not cross-checked in 1 of 2" in codes["not-cross-checked"].message
    # the iperf3 names mean nothing to a workload that does not declare them
    other = trial(3, **{"iperf3.generator_bound": 1.0, "iperf3.bytes.up": 1e9})
    assert trial_warnings([other], "direct up") == []
