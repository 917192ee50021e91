"""The host's CPU time shares and steal over a trial (monitor/hostload.py), the `steal` warning and how the
terminal and the HTML report show it."""

from __future__ import annotations

import time
from collections import namedtuple

import pytest

from tests.unit.report_data import trial
from tunbench.monitor import hostload
from tunbench.report.html.tables import warnings_html
from tunbench.report.summary import summarize_trials
from tunbench.report.terminal import warning_lines
from tunbench.stats import steal_warnings

# two readings of a real 2-CPU VM's `cpu` line (psutil.cpu_times()), 10 s apart: 20 CPU-s in all
BEFORE = {
    "user": 3077.39,
    "nice": 5.06,
    "system": 2159.9,
    "idle": 4939.5,
    "iowait": 27.77,
    "irq": 0.0,
    "softirq": 530.24,
    "steal": 4.71,
}
DELTA = {"user": 8.0, "nice": 1.0, "system": 4.0, "idle": 2.5, "iowait": 0.5, "irq": 0.0, "softirq": 2.0, "steal": 2.0}
AFTER = {k: v + DELTA[k] for k, v in BEFORE.items()}


def test_cpu_shares_are_percent_of_all_cpu_time() -> None:
    s = hostload.cpu_shares(BEFORE, AFTER)
    assert s["user_pct"] == pytest.approx(45.0)  # user + nice
    assert s["system_pct"] == pytest.approx(20.0)
    assert s["softirq_pct"] == pytest.approx(10.0)
    assert s["irq_pct"] == 0.0
    assert s["idle_pct"] == pytest.approx(12.5)
    assert s["iowait_pct"] == pytest.approx(2.5)
    assert s["steal_pct"] == pytest.approx(10.0)
    assert s["busy_pct"] == pytest.approx(75.0)
    parts = ("user_pct", "system_pct", "irq_pct", "softirq_pct", "idle_pct", "iowait_pct", "steal_pct")
    assert sum(s[k] for k in parts) == pytest.approx(100.0)


def test_cpu_shares_no_time_or_missing_fields() -> None:
    assert hostload.cpu_shares(BEFORE, BEFORE) == {}
    assert hostload.cpu_shares(AFTER, BEFORE) == {}  # counters never go back; if they do, nothing is said
    old_kernel = {k: v for k, v in AFTER.items() if k != "steal"}
    assert hostload.cpu_shares({k: v for k, v in BEFORE.items() if k != "steal"}, old_kernel)["steal_pct"] == 0.0


def test_cpu_times_reads_psutil(monkeypatch: pytest.MonkeyPatch) -> None:
    fields = (*hostload.FIELDS, "guest", "guest_nice")
    t = namedtuple("scputimes", fields)(*range(len(fields)))
    monkeypatch.setattr(hostload.psutil, "cpu_times", lambda: t)
    assert hostload.cpu_times() == {f: float(i) for i, f in enumerate(hostload.FIELDS)}


def test_host_load_writes_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = iter([BEFORE, AFTER])
    loads = iter([0.5, 1.75])
    monkeypatch.setattr(hostload, "cpu_times", lambda: next(readings))
    monkeypatch.setattr(hostload, "load1", lambda: next(loads))
    metrics: dict[str, float | None] = {}
    with hostload.host_load(metrics):
        pass
    assert metrics["host.steal_pct"] == pytest.approx(10.0)
    assert metrics["host.busy_pct"] == pytest.approx(75.0)
    assert metrics["host.load1_start"] == 0.5 and metrics["host.load1_end"] == 1.75


def test_host_load_on_this_machine() -> None:
    metrics: dict[str, float | None] = {}
    with hostload.host_load(metrics):
        time.sleep(0.1)  # the counters tick at 100 Hz per CPU
    assert {"host.steal_pct", "host.busy_pct", "host.load1_start", "host.load1_end"} <= set(metrics)


def test_host_load_never_fails_a_trial(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> dict[str, float]:
        raise OSError("no /proc")

    monkeypatch.setattr(hostload, "cpu_times", boom)
    metrics: dict[str, float | None] = {}
    with hostload.host_load(metrics):
        pass
    assert metrics == {}


@pytest.mark.parametrize(("steal", "fires"), [([0.0, 4.9], False), ([4.9, 5.0], True), ([], False)])
def test_steal_threshold(steal: list[float], fires: bool) -> None:
    assert bool(steal_warnings(steal)) is fires


def test_steal_warning_names_the_highest_and_the_fix() -> None:
    (w,) = steal_warnings([1.0, 12.34, 6.0, float("nan")], label="wireguard-go")
    assert w.code == "steal"
    assert w.message == "wireguard-go: steal time up to 12.3% of the CPU time in 2 of 3 trial(s)"
    assert "neighbours took CPU" in w.fix and "re-run" in w.fix


def test_summary_terminal_and_html_group_steal() -> None:
    trials = [
        trial(1, "direct", 1e9, extra={"host.steal_pct": 0.5}),
        trial(2, "wireguard-go", 8e8, extra={"host.steal_pct": 7.0}),
        trial(3, "wireguard-go", 8e8, repetition=2, extra={"host.steal_pct": 9.5}),
        trial(4, "openvpn", 5e8, extra={"host.steal_pct": 6.0}),
        trial(5, "boringtun", 7e8),  # recorded before this metric existed
    ]
    sums = summarize_trials(trials)
    codes = {s.case.label: [w.code for w in s.warnings] for s in sums}
    assert "steal" not in codes["direct"] and "steal" not in codes["boringtun"]
    assert "steal" in codes["wireguard-go"] and "steal" in codes["openvpn"]
    lines = [ln for ln in warning_lines(sums) if "steal" in ln]
    assert len(lines) == 1
    assert "in 3 trial(s)" in lines[0]
    assert "wireguard-go up (up to 9.5%)" in lines[0] and "openvpn up (up to 6.0%)" in lines[0]
    assert "quieter host" in lines[0]
    assert "neighbours took CPU (steal time)" in warnings_html(sums)
