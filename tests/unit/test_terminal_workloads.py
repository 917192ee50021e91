"""The terminal's second table: non-throughput workloads with their headline metrics (median, n)."""

from __future__ import annotations

from rich.console import Console

from tunbench.report.summary import summarize_trials
from tunbench.report.terminal import has_throughput_cases, summary_table, trial_headline, workload_tables
from tunbench.results import TrialRecord


def trial(seq: int, label: str, workload: str, metrics: dict[str, float | None], status: str = "ok") -> TrialRecord:
    return TrialRecord(
        seq=seq,
        tunnel=label,
        label=label,
        profile="lan",
        workload=workload,
        flows=1,
        direction="-" if workload != "iperf3" else "up",
        repetition=seq,
        params={},
        status=status,
        error="boom" if status != "ok" else "",
        metrics=metrics,
    )


def render(*tables: object) -> str:
    console = Console(width=200, record=True)
    for t in tables:
        console.print(t)
    return console.export_text()


TRIALS = [
    trial(1, "wg", "latency", {"latency.p50_ms": 0.5, "latency.p99_ms": 3.0, "latency.loss": 0.0}),
    trial(2, "wg", "latency", {"latency.p50_ms": 0.7, "latency.p99_ms": 5.0, "latency.loss": 0.01}),
    trial(3, "wg", "latency", {"latency.p50_ms": 0.9, "latency.p99_ms": 4.0, "latency.loss": 0.0}),
    trial(4, "wg", "latency", {}, status="failed"),
    trial(5, "wg", "udp-search", {"zero_loss_bps.64": 50e6, "zero_loss_bps.1400": 800e6, "search_steps.64": 5}),
    trial(6, "wg", "iperf3", {"throughput_bps": 900e6}),
    trial(7, "wg", "connect", {"connect.p50_s": 0.1234, "connect.max_s": 0.2}),
]


def test_median_and_n_per_case() -> None:
    text = render(*workload_tables(TRIALS))
    assert "latency (median of repetitions)" in text
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("wg") and "0.70" in ln)
    assert "4.00" in line  # median p99 of 3, 5, 4
    assert "3 (1✗)" in line
    assert "udp-search" in text and "64 B Mbit/s" in text and "1400 B Mbit/s" in text and "800" in text
    assert "123.4" in text  # connect p50 in ms


def test_throughput_table_keeps_only_throughput_cases() -> None:
    sums = summarize_trials(TRIALS)
    assert has_throughput_cases(sums)
    text = render(summary_table(sums))
    assert "900" in text and "udp-search" not in text
    assert sum(1 for ln in text.splitlines() if ln.strip().startswith("wg")) == 1
    assert not has_throughput_cases(summarize_trials([t for t in TRIALS if t.workload == "latency"]))


def test_trial_headline() -> None:
    assert trial_headline(TRIALS[0]) == "RTT p50 0.50 ms, p99 3.00 ms"
    assert trial_headline(TRIALS[5]) == "900 Mbit/s"
    assert "64 B 50" in trial_headline(TRIALS[4])
