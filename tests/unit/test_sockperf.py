"""rr and udp-rr with `generator = "sockperf"` (workloads/sockperf.py, workloads/interactive.py): sockperf's
argv, its ping-pong output parsed from captured runs (tests/data/sockperf-*.txt: tunbench runs through direct
and wireguard-go on `lan`, and by hand in `tunbench link shell --profile lan` a client without a server and one
without --full-rtt), the figures under their declared keys, the options it refuses, and compare's p99.9."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.report_data import run, samples
from tests.unit.test_netperf import rr_trials
from tunbench import workloads
from tunbench.errors import TrialError
from tunbench.metrics import REGISTRY
from tunbench.report.compare import compare_runs
from tunbench.units import Window
from tunbench.workloads import interactive as rr
from tunbench.workloads import sockperf
from tunbench.workloads.base import Axes

DATA = Path(__file__).resolve().parents[1] / "data"


def text(name: str) -> str:
    return (DATA / f"sockperf-{name}.txt").read_text()


# ---- argv ---------------------------------------------------------------------------------------------


def test_argv_asks_for_round_trips_and_adds_sockperfs_own_warm_up() -> None:
    argv = sockperf.client_argv("198.18.0.2", 5201, sockperf.SockperfParams("udp", 5, 100))
    assert argv[:2] == ["sockperf", "ping-pong"]
    assert argv[argv.index("-i") + 1] == "198.18.0.2" and argv[argv.index("-p") + 1] == "5201"
    assert argv[argv.index("-t") + 1] == "6"  # 5 measured seconds + its 400 ms warm-up and 50 ms cool-down
    assert argv[argv.index("-m") + 1] == "100"
    assert "--full-rtt" in argv and "--tcp" not in argv
    assert "--tcp" in sockperf.client_argv("127.0.0.1", 5201, sockperf.SockperfParams("tcp", 5))
    assert sockperf.server_argv("tcp", 5201) == ["sockperf", "server", "-i", "0.0.0.0", "-p", "5201", "--tcp"]
    assert "--tcp" not in sockperf.server_argv("udp", 5201)


# ---- parser -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["udp-wireguard-go", "tcp-direct"])
def test_parse_captured_outputs(name: str) -> None:
    r = sockperf.parse(text(name))
    lat = r.latency_us
    assert lat["min"] <= lat["p25"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    assert r.elapsed_s == pytest.approx(2.55) and r.warmup_s == pytest.approx(0.4)
    assert r.transactions_per_s == pytest.approx(r.received / 2.55)
    assert r.dropped == 0


def test_parse_reads_the_figures_as_printed() -> None:
    r = sockperf.parse(text("udp-wireguard-go"))
    assert (r.sent, r.received) == (19173, 19173)
    assert r.latency_us["mean"] == pytest.approx(132.992) and r.latency_us["stddev"] == pytest.approx(49.964)
    assert r.latency_us["p999"] == pytest.approx(428.239) and r.latency_us["p99"] == pytest.approx(237.234)
    assert r.latency_us["p50"] == pytest.approx(125.182)
    assert (r.latency_us["min"], r.latency_us["max"]) == (pytest.approx(74.721), pytest.approx(3361.003))


def test_a_client_without_a_server_is_a_trial_error() -> None:
    with pytest.raises(TrialError, match="no echo"):
        sockperf.parse(text("udp-no-server"))


def test_one_way_latency_is_refused_not_stored_as_a_round_trip() -> None:
    with pytest.raises(TrialError, match="half the round trip"):
        sockperf.parse(text("udp-burst4-one-way"))


@pytest.mark.parametrize(
    ("cut", "says"),
    [
        ("[Valid Duration]", "valid duration"),
        ("avg-rtt", "round-trip average"),
        ("percentile 99.000", "lacks p99"),
        ("<MIN>", "lacks min"),
    ],
)
def test_partial_output_is_a_trial_error_naming_what_is_missing(cut: str, says: str) -> None:
    full = text("udp-wireguard-go")
    partial = "\n".join(line for line in full.splitlines() if cut not in line)
    with pytest.raises(TrialError, match=says):
        sockperf.parse(partial)


@pytest.mark.parametrize("garbage", ["", "sockperf: error: connect() failed\n", "\x00\xff garbage"])
def test_garbage_is_a_trial_error(garbage: str) -> None:
    with pytest.raises(TrialError):
        sockperf.parse(garbage)


@settings(max_examples=200, deadline=None, database=None)
@given(st.integers(0, 24), st.integers(0, 60), st.text(max_size=20))
def test_truncated_or_spliced_output_is_a_trial_error_or_a_result(line: int, cut: int, junk: str) -> None:
    lines = text("udp-wireguard-go").splitlines()
    lines[line] = lines[line][:cut] + junk
    try:
        r = sockperf.parse("\n".join(lines))
    except TrialError:
        return
    assert r.elapsed_s >= 0 and r.received >= 0


# ---- figures ------------------------------------------------------------------------------------------


def test_metrics_are_declared_and_hold_the_round_trips() -> None:
    r = sockperf.parse(text("udp-wireguard-go"))
    m = rr.sockperf_metrics(r, 14)
    assert all(REGISTRY.find(k) is not None for k in m), [k for k in m if REGISTRY.find(k) is None]
    assert REGISTRY.find(rr.LATENCY_P999.name) is rr.LATENCY_P999
    assert m[rr.LATENCY_P999.name] == pytest.approx(428.239)
    assert m[rr.LATENCY_P99.name] == pytest.approx(237.234)
    assert m[rr.LATENCY.key(stat="p50")] == pytest.approx(125.182)
    assert m[rr.TRANSACTIONS.name] == pytest.approx(19173 / 2.55)
    assert m[rr.FIGURE.key(figure="request_bytes")] == m[rr.FIGURE.key(figure="response_bytes")] == 14.0
    assert rr.LATENCY_STEP.name not in m  # netperf's histogram step: sockperf has none


def test_the_window_ends_before_sockperfs_exit_and_lasts_its_valid_duration() -> None:
    r = sockperf.parse(text("udp-wireguard-go"))
    start, end = rr.sockperf_window(r, 100.0)
    assert end == pytest.approx(100.0 - 0.15) and end - start == pytest.approx(2.55)


def test_p999_needs_a_thousand_transactions() -> None:
    r = dataclasses.replace(sockperf.parse(text("tcp-direct")), received=999)
    assert rr.sockperf_metrics(r, 14)[rr.LATENCY_P999.name] is None
    assert rr.sockperf_metrics(dataclasses.replace(r, received=1000), 14)[rr.LATENCY_P999.name] is not None


def test_p999_is_in_the_gate_family_with_p99() -> None:
    assert rr.LATENCY_P999.family == rr.LATENCY_P99.family == "gate"
    assert (rr.LATENCY_P999, "latency") in workloads.get("rr").compared  # type: ignore[attr-defined]


# ---- options ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["rr", "udp-rr"])
def test_the_generator_is_netperf_unless_asked(kind: str) -> None:
    w = workloads.get(kind)
    assert w.options(None).generator == "netperf"  # type: ignore[attr-defined]
    assert w.programs(w.options(None)) == ("netperf", "netserver")
    opts = w.options({"generator": "sockperf"})
    assert w.programs(opts) == ("sockperf",)
    assert opts.message_bytes() == 14  # type: ignore[attr-defined]  # sockperf's smallest message
    assert w.options({"generator": "sockperf", "request_bytes": 64, "response_bytes": 64}).message_bytes() == 64  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ({"generator": "sockperf", "burst": 4}, "one transaction in flight"),
        ({"generator": "sockperf", "request_bytes": 64, "response_bytes": 1024}, "must be equal"),
        ({"generator": "iperf3"}, "netperf"),
    ],
)
def test_what_sockperf_cannot_do_is_refused(raw: dict[str, object], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        workloads.get("udp-rr").options(raw)


def test_a_scenario_asking_sockperf_for_a_burst_names_file_line_and_key(tmp_path: Path) -> None:
    from tunbench.config.load import load_scenario
    from tunbench.errors import ConfigError

    f = tmp_path / "s.toml"
    f.write_text('[workload]\nkind = ["rr"]\n\n[workload.rr]\nburst = 2\ngenerator = "sockperf"\n')
    with pytest.raises(ConfigError) as e:
        load_scenario(f)
    assert e.value.key == "workload.rr.generator" and e.value.line == 6
    assert "one transaction in flight" in str(e.value)


def test_crr_has_no_generator_choice() -> None:
    with pytest.raises(ValueError):
        workloads.get("crr").options({"generator": "sockperf"})


def test_estimate_counts_sockperfs_wait_extra_second_and_exit_per_run() -> None:
    w = workloads.get("udp-rr")
    window = Window(duration_s=5, omit_s=1)
    net = w.estimate(Axes(), w.options(None), window)
    # per run: 2.1 s before its test, -t one second longer, 0.15 s from its valid duration's end to its exit
    assert w.estimate(Axes(), w.options({"generator": "sockperf"}), window) == pytest.approx(net + 2 * 3.25)
    assert w.estimate(Axes(), w.options({"generator": "sockperf"}), Window(duration_s=5, omit_s=0)) == pytest.approx(
        w.estimate(Axes(), w.options(None), Window(duration_s=5, omit_s=0)) + 3.25
    )


# ---- compare and the report ---------------------------------------------------------------------------


def test_compare_judges_the_p999() -> None:
    def with_p999(trials: list, p999: float) -> list:  # type: ignore[type-arg]
        for i, t in enumerate(trials):
            t.metrics[rr.LATENCY_P999.name] = p999 * (1.0 + 0.002 * i)
        return trials

    a = run(with_p999(rr_trials("wg", samples(8000.0, 8, 0.01, seed=1), 250.0, 0.4), 400.0), uid="tba")
    b = run(with_p999(rr_trials("wg", samples(8000.0, 8, 0.01, seed=2), 250.0, 0.4), 600.0), rid=2, uid="tbb")
    rows = {r.metric.name: r for r in compare_runs(a, b, threshold=0.03).rows}
    assert rows[rr.LATENCY_P999.name].gated
    assert rows[rr.LATENCY_P999.name].verdict_text == "slower"


def test_the_report_draws_the_p999_where_there_is_one() -> None:
    from tunbench.report.html.transactions import fig_transactions

    wg = rr_trials("wg", [8000.0, 8100.0, 7900.0], 250.0, 0.4)
    for t in wg:
        t.metrics.update({rr.LATENCY.key(stat="p50"): 100.0, rr.LATENCY_P999.name: 900.0})
    fig = fig_transactions(wg, {"wg": "#123456"})
    assert fig is not None
    assert list(fig.data[0].x) == ["p50", "p99", "p99.9"]


# ---- installing it ------------------------------------------------------------------------------------


def test_make_deps_installs_sockperf_and_doctor_names_its_package() -> None:
    from tunbench.doctor.packages import Family, packages_for

    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    apt = makefile.split("APT_PACKAGES :=", 1)[1].split("\n# ", 1)[0]
    assert "sockperf" in apt.split()
    assert packages_for("sockperf", Family.APT) == ("sockperf",)
    assert ("sockperf", 'generator = "sockperf"') in workloads.get("udp-rr").optional


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("percentile 99.000 = 1.2.3", "lacks p99"),
        ("percentile 99.000 = -5", "lacks p99"),
        ("percentile 99.000 = 5e3", "lacks p99"),
        ("<MIN> observation = 1e9", "lacks min"),
    ],
)
def test_a_figure_that_is_not_a_number_is_not_read(bad: str, says: str) -> None:
    label = bad.split(" =")[0]
    lines = [line if label not in line else f"sockperf: ---> {bad}" for line in text("udp-wireguard-go").splitlines()]
    with pytest.raises(TrialError, match=says):
        sockperf.parse("\n".join(lines))


def test_a_run_with_sockperf_needs_sockperf_not_netperf(monkeypatch: pytest.MonkeyPatch) -> None:
    from tunbench.errors import DependencyMissing
    from tunbench.session import check

    w = workloads.get("udp-rr")
    options = {"udp-rr": w.options({"generator": "sockperf"})}
    monkeypatch.setattr(check.shutil, "which", lambda p: None if p in ("sockperf", "netperf") else f"/usr/bin/{p}")
    with pytest.raises(DependencyMissing) as e:
        check.check_dependencies([], [], ("udp-rr",), options=options)
    assert "the workload udp-rr needs sockperf" in str(e.value) and "netperf" not in str(e.value)
    assert check.program_needs([], ["udp-rr"], options)["workload udp-rr"] == ["sockperf"]
    assert check.program_needs([], ["udp-rr"])["workload udp-rr"] == ["netperf", "netserver"]
