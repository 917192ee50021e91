"""A profile's [[faults]]: the schema, tunbench-link's SPEC, where they are refused, and what the stats file's
records give (the faults that fired, the recovery figures, the lines `show` prints)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tunbench.config.load import load_scenario
from tunbench.errors import ConfigError
from tunbench.link.binary import link_binary_or_none
from tunbench.link.fault_record import ANSWERS, fault_metrics, fired, fired_params
from tunbench.link.faults import CLASSES, ProfileFault
from tunbench.link.profile import Profile, load_profile_file
from tunbench.report.faults import fault_lines
from tunbench.results import TrialRecord
from tunbench.session import resolve_profiles
from tunbench.tomlfile import validate

S = 1_000_000_000


def profile(*faults: dict[str, Any], **more: Any) -> Profile:
    return Profile.model_validate({"name": "f", "up": {"delay": "5ms"}, "faults": list(faults), **more})


def test_faults_become_per_direction_specs() -> None:
    p = profile(
        {"match": "wg.initiation", "direction": "up", "first": 2},
        {"match": "ike.*", "nth": 3, "port": 500, "size": "60-400", "action": "delay", "delay": "2s"},
        {"match": "any", "direction": "down", "during": ["2s", "22s"], "action": "dup"},
    )
    assert p.link_args() == [
        "--a2b",
        "delay=5ms",
        "--a2b-faults",
        "match=wg.initiation,first=2,action=drop;match=ike.*,port=500,size=60-400,nth=3,action=delay,delay=2s",
        "--b2a-faults",
        "match=ike.*,port=500,size=60-400,nth=3,action=delay,delay=2s;match=any,during=2s..22s,action=dup",
    ]
    assert p.timed(), "a fault during a span follows the schedule"
    assert not profile({"match": "wg.initiation", "first": 2}).timed(), "counted faults need no schedule"


def test_classify_alone_asks_the_emulator_to_record() -> None:
    assert profile(classify=True).link_args()[-2:] == ["--classify", "on"]
    assert "--classify" not in profile({"match": "esp", "every": 2}, classify=True).link_args()


@pytest.mark.parametrize(
    ("fault", "want"),
    [
        ({"match": "wg.initiation"}, "exactly one of nth, first, every or during"),
        ({"match": "wg.initiation", "nth": 1, "first": 2}, r"\(it has nth, first\)"),
        ({"match": "wg.initiation", "nth": 0}, "faults.0.nth"),
        ({"match": "wg.initiation", "nth": 1, "action": "delay"}, "takes a `delay`"),
        ({"match": "wg.initiation", "nth": 1, "delay": "1s"}, "takes a `delay`"),
        ({"match": "wg initiation", "nth": 1}, "match: bad value"),
        ({"match": "esp", "during": ["2s", "soon"]}, "during: bad time"),
        ({"match": "esp", "nth": 1, "size": "big"}, "size: bad value"),
        ({"match": "esp", "nth": 1, "colour": "red"}, "faults.0.colour"),
    ],
)
def test_bad_faults_name_the_key(fault: dict[str, Any], want: str) -> None:
    with pytest.raises(ConfigError, match=want):
        validate(Profile, {"name": "f", "faults": [fault]}, text="", source="p.toml")


def test_faults_and_classify_need_the_emulator_and_the_error_names_the_key() -> None:
    with pytest.raises(ConfigError, match="faults needs the emulator") as e:
        validate(Profile, {"name": "f", "emulated": False, "faults": [{"match": "esp", "nth": 1}]}, text="", source="p")
    assert e.value.key == "faults"
    # found by the parser fuzz test: the error named neither a key nor a line
    with pytest.raises(ConfigError, match="classify needs the emulator") as e:
        validate(Profile, {"name": "f", "emulated": False, "classify": True}, text="", source="p")
    assert e.value.key == "classify"


def test_describe() -> None:
    assert (
        ProfileFault(match="wg.initiation", first=2, direction="up").describe() == "up: drop the first 2 wg.initiation"
    )
    assert ProfileFault(match="esp", nth=3).describe() == "both: drop the 3rd esp"
    f = ProfileFault(match="any", during=("2s", "22s"), action="delay", delay="1s", port=1194)
    assert f.describe() == "both: delay by 1s every message on port 1194 from 2s to 22s"


def test_every_answer_is_a_class() -> None:
    assert set(ANSWERS) <= set(CLASSES) and set(ANSWERS.values()) <= set(CLASSES)


def wg_bringup(dropped: int, rtt_ns: int = 2_000_000) -> dict[str, Any]:
    """The stats of a WireGuard bring-up whose first `dropped` initiations a fault dropped: one initiation
    every 5.1 s, the response an RTT later, the first data just after."""
    ups, downs, faults = [], [], []
    t0 = 100 * S  # since the emulator's start; its schedule started 1 s after it, at 50 s on CLOCK_MONOTONIC
    for i in range(dropped + 1):
        at = t0 + i * 5_100_000_000
        fate = "dropped_fault" if i < dropped else "sent"
        ups.append({"since_start_ns": at, "at_ns": at - S, "class": "wg.initiation", "size": 176, "fate": fate})
        if i < dropped:
            faults.append(
                {"fault": 0, "since_start_ns": at, "at_ns": at - S, "class": "wg.initiation", "ordinal": i + 1,
                 "action": "drop", "size": 176, "key_id": None}
            )  # fmt: skip
    done = ups[-1]["since_start_ns"] + rtt_ns // 2
    downs.append({"since_start_ns": done, "at_ns": done - S, "class": "wg.response", "size": 120, "fate": "sent"})
    marks = [{"since_start_ns": done + rtt_ns // 2 + 1000, "at_ns": done + rtt_ns // 2 + 1000 - S, "class": "wg.data"}]
    return {
        "a2b": {"faults": faults, "messages": ups, "data_marks": marks, "delivered": 10},
        "b2a": {"faults": [], "messages": downs, "data_marks": []},
        "schedule": {"start_ns": 50 * S},
    }


def test_recovery_from_two_dropped_initiations() -> None:
    faults = [ProfileFault(match="wg.initiation", first=2, direction="up")]
    m = fault_metrics(wg_bringup(2), faults)
    assert m["faults.fired"] == 2.0
    assert m["faults.retransmits"] == 2.0, "the second (dropped) and third (delivered) initiation"
    assert m["faults.handshake_ms"] == pytest.approx(10_200 + 1, abs=0.01)
    assert m["faults.first_data_ms"] == pytest.approx(10_200 + 2.001, abs=0.01)
    assert m["faults.start_to_data_ms"] == pytest.approx(10_200 + 2.001, abs=0.01)


def test_without_faults_only_the_bringup_is_measured() -> None:
    m = fault_metrics(wg_bringup(0), [])
    assert m == {"faults.start_to_data_ms": pytest.approx(2.001)}
    assert fault_metrics({}, []) == {}


def test_no_recovery_no_figure() -> None:
    stats = wg_bringup(2)
    stats["b2a"]["messages"] = []
    stats["a2b"]["data_marks"] = []
    m = fault_metrics(stats, [ProfileFault(match="wg.initiation", first=2, direction="up")])
    assert "faults.handshake_ms" not in m and "faults.first_data_ms" not in m
    assert m["faults.retransmits"] == 2.0, "counted to the end"


def test_a_fault_on_data_has_no_handshake() -> None:
    stats = {
        "b2a": {
            "faults": [
                {"fault": 1, "since_start_ns": 5 * S, "class": "wg.data", "ordinal": 7, "action": "drop", "size": 80}
            ],
            "data_marks": [{"since_start_ns": 5 * S + 3_000_000, "class": "wg.data"}],
        }
    }
    faults = [ProfileFault(match="wg.initiation", first=1, direction="up"), ProfileFault(match="wg.data", nth=7)]
    m = fault_metrics(stats, faults)
    assert "faults.handshake_ms" not in m and m["faults.first_data_ms"] == pytest.approx(3.0)
    (hit,) = fired(stats, faults)
    assert hit.fault == 1 and hit.direction == "down", "the direction's second fault is the profile's second"


def test_fired_faults_are_kept_on_the_series_axis_and_shown() -> None:
    faults = [ProfileFault(match="wg.initiation", first=2, direction="up")]
    stats = wg_bringup(2)
    # the emulator started at 49 s (CLOCK_MONOTONIC): the first fault at 149 s, the second at 154.1 s
    kept = fired_params(stats, fired(stats, faults), origin_ns=160 * S)
    assert [(f["ordinal"], f["t_s"], f["class"]) for f in kept] == [
        (1, -11.0, "wg.initiation"),
        (2, -5.9, "wg.initiation"),
    ]
    assert [f["since_start_s"] for f in kept] == [100.0, 105.1]
    assert fired_params(stats, fired(stats, faults), None)[0]["t_s"] is None
    rec = TrialRecord(3, "wireguard-go", "wireguard-go", "f", "iperf3", 1, "up", 1, params={"faults_fired": kept})
    rec.metrics = fault_metrics(stats, faults)
    head, line = fault_lines([rec])
    assert "bring-up" in head
    assert line.startswith("  wireguard-go · f · iperf3 rep 1: up drop wg.initiation #1 at -11.00 s, #2 at -5.90 s; ")
    assert "handshake 10.20 s after the first" in line and "2 retransmits" in line


def test_the_builtin_fault_profiles_load() -> None:
    from tunbench.link.profile import builtin_dir

    found = [load_profile_file(p) for p in sorted(builtin_dir().glob("*.toml"))]
    assert any(p.faults for p in found)


def test_a_profile_file_with_faults(tmp_path: Path) -> None:
    f = tmp_path / "p.toml"
    f.write_text(
        'name = "p"\n[up]\ndelay = "1ms"\n\n[[faults]]\ndirection = "up"\nmatch = "wg.initiation"\nfirst = 2\n'
    )
    assert load_profile_file(f).faults == [ProfileFault(match="wg.initiation", first=2, direction="up")]
    f.write_text('name = "p"\n\n[[faults]]\nmatch = "wg.initiation"\nfirst = 2\nnth = 1\n')
    with pytest.raises(ConfigError) as e:
        load_profile_file(f)
    assert e.value.line == 3


def _dry(*args: str) -> tuple[int, str]:
    from typer.testing import CliRunner

    from tunbench.cli.app import app

    res = CliRunner().invoke(app, ["run", "--dry-run", "-t", "wireguard-go", *args], env={"COLUMNS": "300"})
    return res.exit_code, " ".join((res.output + str(res.exception or "")).split())


def test_a_dry_run_lists_the_faults() -> None:
    code, out = _dry("--profile", "wg-init-loss-2", "-w", "connect")
    assert code == 0, out
    assert "faults of wg-init-loss-2: up: drop the first 2 wg.initiation" in out


@pytest.mark.parametrize(
    ("args", "refused"),
    [
        (["-w", "storm", "--profile", "wg-init-loss-2"], "workload 'storm' brings up many clients"),
        (["-w", "iperf3", "--warm", "2", "--profile", "wg-init-loss-2"], "warm = 2"),
        (["-w", "connect", "--profile", "wg-init-loss-2"], ""),  # each bring-up has its emulator
        (["-w", "iperf3", "--profile", "wg-init-loss-2"], ""),
    ],
)
def test_faults_are_refused_where_events_are(args: list[str], refused: str) -> None:
    code, out = _dry(*args)
    if refused:
        assert code != 0 and refused in out and "(events, a trace, faults)" in out, out
    else:
        assert code == 0, out


def test_a_fault_during_a_span_is_refused_with_connect(tmp_path: Path) -> None:
    f = tmp_path / "p.toml"
    f.write_text('name = "p"\n[up]\ndelay = "1ms"\n\n[[faults]]\nmatch = "wg.initiation"\nduring = ["0s", "20s"]\n')
    code, out = _dry("-w", "connect", "--profile", str(f))
    assert code != 0 and "workload 'connect' brings up many clients or its own tunnels" in out, out


def test_the_html_report_has_a_faults_table_and_marks_them_on_the_timeline() -> None:
    from tests.unit.report_data import run, trial
    from tunbench.report.html import page as run_page
    from tunbench.report.html.series import link_events

    faults = [ProfileFault(match="wg.initiation", first=2, direction="up")]
    stats = wg_bringup(2)
    t = trial(1, "wireguard-go", 5e8, extra=fault_metrics(stats, faults))
    t.params["faults_fired"] = fired_params(stats, fired(stats, faults), origin_ns=160 * S)
    assert link_events(t) == [(-11.0, -11.0, "drop wg.initiation #1 (up)"), (-5.9, -5.9, "drop wg.initiation #2 (up)")]
    page = run_page.render([run([t])])
    assert 'id="r0-sec-faults"' in page
    assert "up drop wg.initiation #1 at -11.00 s, #2 at -5.90 s" in page


def test_connect_keeps_each_bringups_faults_and_the_median_figures(tmp_path: Path) -> None:
    import contextlib
    from collections.abc import Iterator
    from types import SimpleNamespace

    from tunbench.link.emulator import LinkEmulator, LinkEnd
    from tunbench.units import Window
    from tunbench.workloads.base import BringupContext
    from tunbench.workloads.connect import ConnectOptions, ConnectWorkload

    prof = profile({"match": "wg.initiation", "first": 2, "direction": "up"})
    rtts = iter([2_000_000, 4_000_000, 60_000_000])

    @contextlib.contextmanager
    def bring_up(name: str, machine: str | None) -> Iterator[SimpleNamespace]:
        emu = LinkEmulator(
            prof, None, tmp_path, 1, a=LinkEnd("a", "x"), b=LinkEnd("b", "y"), mtu=1500, configure=lambda: None
        )  # type: ignore[arg-type]
        yield SimpleNamespace(setup_s=10.5, topo=SimpleNamespace(link=emu))
        emu.stats = wg_bringup(2, next(rtts))  # as the emulator leaves them when the bring-up ends

    ctx = BringupContext(bring_up, None, tmp_path, "t", Window(1, 0), ConnectOptions(count=3))  # type: ignore[arg-type]
    m = ConnectWorkload().measure(ctx)
    assert [f["bringup"] for f in m.params["faults_fired"]] == ["u1", "u1", "u2", "u2", "u3", "u3"]
    assert m.metrics["faults.first_data_ms"] == pytest.approx(10_200 + 4.001, abs=0.01), "the median of three"
    assert [v for _, v in m.series["faults.first_data_ms"]] == pytest.approx([10_202.001, 10_204.001, 10_260.001])


def test_the_recovery_workload_measures_through_a_fault_during_a_span_only() -> None:
    from tunbench.workloads.recovery import measurable

    assert measurable(profile({"match": "wg.initiation", "during": ["2s", "22s"]}))
    assert not measurable(profile({"match": "wg.initiation", "first": 2})), "a counted one fires in the bring-up"


def test_openvpn_on_other_ports() -> None:
    p = profile({"match": "ovpn.hard_reset_client", "nth": 1}, ovpn_ports=[443, 1194])
    assert p.link_args()[-2:] == ["--ovpn-ports", "443,1194"]
    assert "--ovpn-ports" not in profile(ovpn_ports=[443]).link_args(), "only where messages are classified"


def test_compare_judges_the_recovery_figures() -> None:
    from tests.unit.report_data import trial
    from tunbench.report.compare.metrics import metrics_for

    t = trial(
        1, "wireguard-go", 5e8, extra=fault_metrics(wg_bringup(2), [ProfileFault(match="wg.initiation", first=2)])
    )
    rows = {m.name: m for m in metrics_for([t])}
    assert {"faults.first_data_ms", "faults.handshake_ms", "faults.start_to_data_ms"} <= set(rows)
    assert rows["faults.first_data_ms"].gates and rows["faults.first_data_ms"].family == "wide"
    assert not rows["faults.first_data_ms"].higher_is_better


@pytest.mark.skipif(link_binary_or_none() is None, reason="tunbench-link not built (make build)")
def test_tunbench_link_judges_each_fault_and_the_error_points_at_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'name = "bad"\n[up]\ndelay = "5ms"\n\n[[faults]]\nmatch = "wg.initiation"\nnth = 1\n\n'
        '[[faults]]\ndirection = "down"\nmatch = "wg.response"\nfirst = 1\naction = "delay"\ndelay = "0s"\n'
    )
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'[run]\nprofiles = ["{bad}"]\n')
    sc, text, source = load_scenario(scenario)
    with pytest.raises(ConfigError) as e:
        resolve_profiles(sc, source, text=text)
    assert (e.value.source, e.value.key, e.value.line) == (str(bad), "faults.1.delay", 14)
    assert "must be longer than 0" in str(e.value)


def test_a_run_of_hits_is_one_item() -> None:
    from tunbench.report.faults import hits_text

    many = [
        {"direction": "up", "action": "drop", "class": "wg.data", "ordinal": i, "t_s": 2.0 + i / 100}
        for i in range(1, 201)
    ]
    assert hits_text(many) == "up drop wg.data #1-#200 (200) from +2.01 s to +4.00 s"
    bringups = [
        {
            "direction": "up",
            "action": "drop",
            "class": "wg.initiation",
            "ordinal": i,
            "since_start_s": 5.0 * i,
            "bringup": b,
        }
        for b in ("u1", "u2", "u3")
        for i in (1, 2)
    ]
    assert hits_text(bringups).startswith(
        "up drop wg.initiation #1 at 5.00 s of the link (u1), #2 at 10.00 s of the link (u1), up drop"
    )
