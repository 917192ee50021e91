"""The gate's tiers (report/compare/gate.py): CPU per bit gates at the threshold, throughput in a wide tier of
its own, `--gate all` as before, and a case without CPU figures keeps throughput in the main tier."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.unit.report_data import run, trial
from tunbench.cli import app
from tunbench.report.compare import (
    CPU_CARRIED,
    CPU_DELIVERED,
    EXIT_REGRESSED,
    OVERHEAD,
    CaseComparison,
    CompareError,
    CompareResult,
    Gate,
    compare_lines,
    compare_runs,
)
from tunbench.results import RunRecord
from tunbench.store.db import Store


def _ab(*, slower: float, costlier: float, reps: int = 12, cpu: bool = True, seed: int = 3) -> RunRecord:
    """base and pr in one run, paired by repetition: pr moves `slower` fewer bits and spends `costlier` more
    CPU per bit on both sides; 1% noise per trial on each figure, 5% drift per round shared by the pair."""
    rng = np.random.default_rng(seed)
    trials = []
    for rep in range(1, reps + 1):
        drift = 4e9 * rng.lognormal(0.0, 0.05)
        for label, bits, cost in (("base", 1.0, 1.0), ("pr", 1.0 - slower, 1.0 + costlier)):
            bps = drift * bits * rng.lognormal(0.0, 0.01)
            # CPU seconds over the 2 s window, so that CPU per bit = cost x 1e-9 s/bit (x noise)
            secs = [bps * 2.0 * 1e-9 * cost * rng.lognormal(0.0, 0.01) for _ in range(2)] if cpu else [None, None]
            trials.append(
                trial(len(trials) + 1, label, bps, tunnel="wireguard-go", repetition=rep,
                      cpu_client_s=secs[0], cpu_server_s=secs[1])
            )  # fmt: skip
    return run(trials, uid="tbgate00")


def _rows(res: CompareResult) -> dict[str, CaseComparison]:
    return {r.metric.name: r for r in res.rows}


def test_cost_gate_holds_cpu_per_bit_at_the_threshold_and_throughput_wide_in_its_own_family() -> None:
    r = _ab(slower=0.0, costlier=0.0)
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03)
    rows = _rows(res)
    total = rows["cpu_s_per_bit"]
    assert total.metric.title == "CPU/bit tunnel" and total.gated and not total.wide
    assert total.result.family_size == 1 and total.result.threshold == pytest.approx(0.03)
    for name in ("throughput_bps", "cpu_s_per_bit.client", "cpu_s_per_bit.server"):
        wide = rows[name]
        assert wide.gated and wide.wide
        assert wide.result.family_size == 3 and wide.result.threshold == pytest.approx(0.06)
    assert res.exit_code == 0


def test_gate_all_holds_every_metric_at_the_threshold_in_one_family() -> None:
    r = _ab(slower=0.0, costlier=0.0)
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03, gate=Gate("all"))
    assert all(x.gated and not x.wide and x.result.family_size == 4 for x in res.rows)
    assert all(x.result.threshold == pytest.approx(0.03) for x in res.rows)


def test_a_4_percent_throughput_loss_fails_the_all_gate_but_not_the_wide_tier() -> None:
    # the same data: 4.5% fewer bits at the same CPU per bit. Under --gate all it is a regression at 3%; the cost
    # gate judges throughput against 6% and CPU per bit (unchanged) against 3%.
    r = _ab(slower=0.045, costlier=0.0)
    every = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03, gate=Gate("all"))
    assert _rows(every)["throughput_bps"].result.regressed and every.exit_code == EXIT_REGRESSED
    cost = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03)
    assert not _rows(cost)["throughput_bps"].result.regressed and cost.exit_code == 0
    assert res_outcome(cost, "throughput_bps") == "unchanged"


def test_a_costlier_build_fails_the_cost_gate_on_the_tunnels_cpu_per_bit() -> None:
    r = _ab(slower=0.0, costlier=0.045)
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03)
    rows = _rows(res)
    assert rows["cpu_s_per_bit"].result.regressed and res.exit_code == EXIT_REGRESSED
    # each side alone is judged at 6%: 4.5% costlier is not beyond it
    assert not rows["cpu_s_per_bit.client"].result.regressed and not rows["cpu_s_per_bit.server"].result.regressed


def test_the_tunnels_cpu_per_bit_is_the_sum_of_the_sides() -> None:
    from tunbench.report.compare import metrics_for

    r = _ab(slower=0.0, costlier=0.0, reps=3)
    by_name = {m.name: m for m in metrics_for(r.trials, ("cpu",))}
    for t in r.trials:
        total = by_name["cpu_s_per_bit"].value(t)
        sides = [by_name[f"cpu_s_per_bit.{side}"].value(t) for side in ("client", "server")]
        assert total is not None and None not in sides
        assert total == pytest.approx(sum(x for x in sides if x is not None))


def test_a_wide_regression_beyond_its_threshold_still_fails_the_gate() -> None:
    r = _ab(slower=0.10, costlier=0.0)
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03)
    assert _rows(res)["throughput_bps"].result.regressed and res.exit_code == EXIT_REGRESSED


def test_a_case_without_cpu_figures_gates_its_throughput_at_the_threshold() -> None:
    r = _ab(slower=0.04, costlier=0.0, cpu=False)
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03)
    thr = _rows(res)["throughput_bps"]
    assert thr.gated and not thr.wide and thr.result.threshold == pytest.approx(0.03)
    assert res.exit_code == EXIT_REGRESSED


def res_outcome(res: CompareResult, name: str) -> str:
    return res.outcome(_rows(res)[name])


def test_the_gate_line_says_what_gates_at_which_threshold_and_why() -> None:
    r = _ab(slower=0.0, costlier=0.0)
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03)
    line = res.gate_line()
    assert line.startswith("gate: CPU/bit tunnel at ±3.0% (the tunnel's CPU time per bit, both sides")
    assert "; throughput, CPU/bit client, CPU/bit server at ±6.0% in a Holm family of their own" in line
    lines = compare_lines(res)
    assert "gate: CPU/bit tunnel" in lines[-2] and lines[-1].startswith("[bold")
    assert "throughput, CPU/bit client, CPU/bit server: Holm over 3 at alpha 0.05, threshold 6.0%" in lines[-1]
    every = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03, gate=Gate("all"))
    assert every.gate_line() == "gate: every metric at ±3.0%, one Holm family (--gate all)"


def test_a_case_measured_on_one_side_only_gates_that_sides_cpu_as_the_tunnels() -> None:
    rng = np.random.default_rng(4)
    trials = []
    for rep in range(1, 9):
        for label, cost in (("base", 1.0), ("pr", 1.05)):
            bps = 4e9 * rng.lognormal(0.0, 0.01)
            trials.append(trial(len(trials) + 1, label, bps, tunnel="socat", repetition=rep,
                                cpu_client_s=bps * 2e-9 * cost))  # fmt: skip
    r = run(trials, uid="tbone000")
    rows = _rows(compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03))
    assert "cpu_s_per_bit.server" not in rows
    assert rows["cpu_s_per_bit"].result.change == pytest.approx(rows["cpu_s_per_bit.client"].result.change)
    assert rows["cpu_s_per_bit"].result.regressed


@pytest.mark.parametrize(("name", "wide"), [("speed", 2.0), ("cost", 0.5), ("cost", float("nan"))])
def test_a_bad_gate_is_refused(name: str, wide: float) -> None:
    with pytest.raises(ValueError):
        Gate(name, wide)


def test_cli_compare_gate_flags(tmp_path: Path) -> None:
    db = tmp_path / "gate.db"
    r = _ab(slower=0.045, costlier=0.0)
    with Store(db) as store:
        rid = store.create_run(
            uid=r.uid, name="pr-1", tunbench_version="0.1.0", provenance=r.provenance, scenario_text="",
            scenario_hash="", scenario={},
        )  # fmt: skip
        for t in r.trials:
            store.add_trial(rid, t)
    cli = CliRunner()
    args = ["compare", "pr-1", "--label-a", "base", "--label-b", "pr", "--threshold", "3%", "--db", str(db)]
    assert cli.invoke(app, args).exit_code == 0
    assert cli.invoke(app, [*args, "--gate", "all"]).exit_code == EXIT_REGRESSED
    assert cli.invoke(app, [*args, "--wide", "1"]).exit_code == EXIT_REGRESSED
    bad = cli.invoke(app, [*args, "--gate", "speed"])  # main() turns a TunbenchError into its exit status
    assert isinstance(bad.exception, CompareError) and bad.exception.exit_code == 2
    assert str(bad.exception) == "--gate: unknown gate 'speed' (expected one of: cost, all)"
    half = cli.invoke(app, [*args, "--wide", "0.5"])
    assert isinstance(half.exception, CompareError) and str(half.exception).startswith("--wide: ")


def _carried(
    *, costlier: float, retrans_noise: float, reps: int = 14, seed: int = 5, padding: float = 0.0
) -> RunRecord:
    """base and pr with the whole trial's CPU, the payload delivered and the bytes carried: pr spends
    `costlier` more CPU per byte it delivers and puts `padding` more bytes on the wire per payload byte. Each
    trial's goodput loses a random share (up to `retrans_noise`) of what was carried, as retransmitted and
    dropped packets do, so CPU per bit of goodput is noisy where CPU per bit delivered (whole test) is not."""
    rng = np.random.default_rng(seed)
    trials = []
    for rep in range(1, reps + 1):
        for label, cost, pad in (("base", 1.0, 0.0), ("pr", 1.0 + costlier, padding)):
            payload = 1e9 * rng.lognormal(0.0, 0.05)  # bytes the generator moved over the whole test, both ways
            carried = payload * 1.05 * (1.0 + pad) * rng.lognormal(0.0, 0.002)  # on the wire: headers, padding
            cpu = payload * 8 * 1e-9 * cost * rng.lognormal(0.0, 0.002)  # seconds: 1 ns per bit delivered
            bps = payload * 8 / 3.0 * (1.0 - rng.uniform(0.0, retrans_noise))  # goodput of the 2 s window
            extra = {
                "carried_bytes": carried, "delivered_bytes": payload,
                "trial_cpu.client.user_s": cpu * 0.1, "trial_cpu.client.sys_s": cpu * 0.4,
                "trial_cpu.server.user_s": cpu * 0.1, "trial_cpu.server.sys_s": cpu * 0.4,
            }  # fmt: skip
            window_cpu = cpu * 2.0 / 3.0 * rng.lognormal(0.0, 0.04)  # the window's edges, read from 10 Hz samples
            trials.append(
                trial(len(trials) + 1, label, bps, tunnel="wireguard-go", repetition=rep,
                      cpu_client_s=window_cpu / 2, cpu_server_s=window_cpu / 2, extra=extra)
            )  # fmt: skip
    return run(trials, uid="tbgate01")


def test_cpu_per_bit_delivered_is_the_whole_trials_cpu_over_the_payload_bits() -> None:
    from tunbench.report.compare import metrics_for

    r = _carried(costlier=0.0, retrans_noise=0.0, reps=2)
    by_name = {m.name: m for m in metrics_for(r.trials, ("cpu",))}
    assert by_name[CPU_DELIVERED].title == "CPU/bit delivered"
    for t in r.trials:
        cpu = sum(v for k, v in t.metrics.items() if k.startswith("trial_cpu.") and v is not None)
        payload, carried = t.metrics["delivered_bytes"] or 0.0, t.metrics["carried_bytes"] or 0.0
        assert by_name[CPU_DELIVERED].value(t) == pytest.approx(cpu / (8 * payload))
        assert by_name[CPU_CARRIED].value(t) == pytest.approx(cpu / (8 * carried))
        assert by_name[OVERHEAD].value(t) == pytest.approx(carried / payload)
    # trials from before the counts (no payload figures at all) have no such metrics
    old = _ab(slower=0.0, costlier=0.0, reps=2)
    assert not {CPU_DELIVERED, CPU_CARRIED, OVERHEAD} & {m.name for m in metrics_for(old.trials, ("cpu",))}


def test_a_store_from_before_gets_the_payload_from_its_generators_whole_test_bytes() -> None:
    from tunbench.report.compare import metrics_for

    r = _carried(costlier=0.0, retrans_noise=0.0, reps=2)
    for t in r.trials:
        payload = t.metrics.pop("delivered_bytes") or 0.0
        t.metrics |= {"iperf3.sent_bytes_total.up": payload * 0.75, "iperf3.sent_bytes_total.down": payload * 0.25}
    by_name = {m.name: m for m in metrics_for(r.trials, ("cpu",))}
    t = r.trials[0]
    cpu = sum(v for k, v in t.metrics.items() if k.startswith("trial_cpu.") and v is not None)
    payload = (t.metrics["iperf3.sent_bytes_total.up"] or 0.0) + (t.metrics["iperf3.sent_bytes_total.down"] or 0.0)
    assert by_name[CPU_DELIVERED].value(t) == pytest.approx(cpu / (8 * payload))


def test_with_the_payload_counted_the_cost_gate_holds_cpu_per_bit_delivered_and_drops_the_rest() -> None:
    r = _carried(costlier=0.0, retrans_noise=0.0)
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03)
    rows = _rows(res)
    assert "cpu_s_per_bit" not in rows  # the sides' figures say the same, with their own noise
    assert CPU_CARRIED not in rows  # the wire's bytes: padding would read as cheaper
    main = rows[CPU_DELIVERED]
    assert main.gated and not main.wide and main.result.family_size == 1
    assert {n for n, x in rows.items() if x.wide} == {
        "throughput_bps",
        OVERHEAD,
        "cpu_s_per_bit.client",
        "cpu_s_per_bit.server",
    }
    assert res.gate_line().startswith("gate: CPU/bit delivered at ±3.0% (the tunnel's CPU time per bit it delivered")
    every = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03, gate=Gate("all"))
    assert {"cpu_s_per_bit", CPU_CARRIED, CPU_DELIVERED, OVERHEAD} <= set(_rows(every))  # --gate all: every metric


def test_a_4_percent_costlier_build_is_caught_by_cpu_per_bit_delivered_through_goodput_noise() -> None:
    # up to 8% of each trial's carried bytes never counts as goodput, at random, and the window's CPU is read
    # with 4% noise: CPU per bit of goodput resolves 4% in 14 pairs barely if at all, CPU per bit delivered can
    r = _carried(costlier=0.04, retrans_noise=0.08)
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03)
    rows = _rows(res)
    assert rows[CPU_DELIVERED].result.regressed and res.exit_code == EXIT_REGRESSED
    every = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03, gate=Gate("all"))
    mde = {n: _rows(every)[n].result.min_detectable_effect for n in ("cpu_s_per_bit", CPU_DELIVERED)}
    assert mde[CPU_DELIVERED] < 0.25 * mde["cpu_s_per_bit"], mde


def test_padding_cannot_make_a_costlier_build_look_cheaper() -> None:
    # +4% CPU per delivered bit and 10% more bytes on the wire, at the same throughput. Dividing by the wire's
    # bytes read this as "CPU/bit carried -5.5%, cheaper (improved)", exit 0.
    r = _carried(costlier=0.04, retrans_noise=0.0, padding=0.10)
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03)
    rows = _rows(res)
    assert rows[CPU_DELIVERED].result.regressed
    assert rows[OVERHEAD].result.regressed  # the padding itself, beyond the wide tier's 6%
    assert not any(x.gated and res.outcome(x) == "improved" for x in res.rows), [
        (n, res.outcome(x)) for n, x in rows.items()
    ]
    assert res.exit_code == EXIT_REGRESSED


@pytest.mark.parametrize("gate", ["cost", "all"])
def test_the_hosts_clock_figures_are_shown_and_never_gate(gate: str) -> None:
    """latency.clock_skew_ms and latency.clock_uncertainty_ms describe how well two hosts' clocks were aligned,
    not the tunnel: compare shows them, in a Holm family of their own, and a large change in them fails no gate,
    while the round-trip figure beside them still gates."""
    trials = []
    for rep in range(1, 9):
        for label, skew in (("base", 1.0), ("pr", 9.0)):  # B's clocks 8 ms further apart: not a regression
            extra = {
                "latency.min_ms": 2.0 + 0.01 * rep,
                "latency.clock_skew_ms": skew + 0.01 * rep,
                "latency.clock_uncertainty_ms": skew / 10 + 0.001 * rep,
            }
            trials.append(trial(len(trials) + 1, label, 4e9, tunnel="wireguard-go", repetition=rep, extra=extra))
    r = run(trials, uid="tbclock0")
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03, gate=Gate(gate))
    rows = _rows(res)
    for name in ("latency.clock_skew_ms", "latency.clock_uncertainty_ms"):
        clock = rows[name]
        assert clock.metric.family == "info" and not clock.metric.gates
        assert not clock.gated and clock.result.significant  # shown, with its verdict, and never gating
        assert clock.result.family_size == 2  # the two clock figures: a family apart from the gated ones
        assert clock.verdict_text == "higher"
    assert rows["latency.min_ms"].gated
    assert res.exit_code == 0
    assert "latency clock_skew" not in res.gate_line()
