from __future__ import annotations

from pathlib import Path

import pytest

from tunbench.config.load import load_scenario
from tunbench.errors import ConfigError
from tunbench.link.binary import link_binary_or_none
from tunbench.link.profile import (
    Profile,
    builtin_dir,
    builtin_names,
    find_profile,
    load_profile_file,
    validate_with_link,
)
from tunbench.session import resolve_profiles
from tunbench.tomlfile import validate


def test_lan_is_plain_veth() -> None:
    p = find_profile("lan")
    assert not p.emulated and p.link_args() == []


def test_every_builtin_loads() -> None:
    for name in builtin_names():
        assert find_profile(name).name == name


def test_inline_profile_per_direction() -> None:
    p = find_profile("x:delay=20ms,up.rate=5mbit,down.rate=20mbit")
    assert p.emulated
    assert p.spec("up") == "delay=20ms,rate=5mbit"
    assert p.spec("down") == "delay=20ms,rate=20mbit"
    assert p.link_args() == ["--a2b", "delay=20ms,rate=5mbit", "--b2a", "delay=20ms,rate=20mbit"]


def test_unknown_profile_lists_builtins() -> None:
    with pytest.raises(ConfigError, match="unknown profile 'moon'.*lan"):
        find_profile("moon")


def test_inline_garbage() -> None:
    with pytest.raises(ConfigError, match="not key=value"):
        find_profile("x:delay")


EXAMPLE = builtin_dir() / "outage-3s.toml"


def test_events_become_per_direction_schedules() -> None:
    p = Profile.model_validate(
        {
            "name": "e",
            "up": {"delay": "10ms"},
            "events": [
                {"at": "4s", "outage": "3s"},
                {"at": "7s", "direction": "up", "rate": "25mbit", "delay": "60ms"},
                {"at": "8s", "direction": "down", "loss": "1%"},
            ],
        }
    )
    assert p.events_spec("up") == "at=4s,outage=3s;at=7s,rate=25mbit,delay=60ms"
    assert p.events_spec("down") == "at=4s,outage=3s;at=8s,loss=1%"
    assert p.event_indexes("down") == [0, 2]
    assert p.link_args() == [
        "--a2b",
        "delay=10ms",
        "--a2b-events",
        "at=4s,outage=3s;at=7s,rate=25mbit,delay=60ms",
        "--b2a-events",
        "at=4s,outage=3s;at=8s,loss=1%",
    ]


def test_a_profile_without_events_gives_the_same_arguments_as_before() -> None:
    assert find_profile("mobile-4g").link_args()[::2] == ["--a2b", "--b2a"]


@pytest.mark.parametrize(
    ("events", "want"),
    [
        ([{"outage": "3s"}], "events.0.at: required key is missing"),
        ([{"at": "1s", "direction": "sideways", "rate": "1mbit"}], "events.0.direction"),
        ([{"at": "1s", "Rate": "1mbit"}], "bad impairment name 'Rate'"),
        ([{"at": "1s;at=2s", "rate": "1mbit"}], "at: bad value"),
        ([{"at": "1s", "rate": "1mbit,loss=5%"}], "rate: bad value"),
    ],
)
def test_bad_events_name_the_key(events: list[dict[str, str]], want: str) -> None:
    with pytest.raises(ConfigError, match=want.replace("(", r"\(")):
        validate(Profile, {"name": "e", "events": events}, text="", source="p.toml")


def test_events_and_traces_need_the_emulator_and_the_error_names_the_key() -> None:
    with pytest.raises(ConfigError, match="events needs the emulator") as e:
        validate(
            Profile, {"name": "e", "emulated": False, "events": [{"at": "1s", "outage": "1s"}]}, text="", source="p"
        )
    assert e.value.key == "events"
    with pytest.raises(ConfigError, match="a trace needs the emulator") as e:
        validate(Profile, {"name": "e", "emulated": False, "up": {"trace": "x.trace"}}, text="", source="p")
    assert e.value.key == "up"


def test_the_example_loads() -> None:
    p = load_profile_file(EXAMPLE)
    assert [e.spec() for e in p.events] == ["at=4s,outage=3s", "at=7s,rate=25mbit"]


@pytest.mark.skipif(link_binary_or_none() is None, reason="tunbench-link not built (make build)")
def test_tunbench_link_judges_each_event_and_the_error_points_at_its_line(tmp_path: Path) -> None:
    validate_with_link(load_profile_file(EXAMPLE))  # the example is valid
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'name = "bad"\n[up]\ndelay = "5ms"\n\n[[events]]\nat = "1s"\noutage = "1s"\n\n'
        '[[events]]\nat = "2s"\ndirection = "down"\ndelay = "1ms"\n\n[[events]]\nat = "3s"\nrate = "0mbit"\n'
    )
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'[run]\nprofiles = ["{bad}"]\n')
    sc, text, source = load_scenario(scenario)
    with pytest.raises(ConfigError) as e:
        resolve_profiles(sc, source, text=text)
    assert e.value.source == str(bad)
    assert e.value.key == "events.2.rate"
    assert e.value.line == 16
    assert "must be at least 1bit" in str(e.value)


def test_a_timeline_becomes_events_after_the_files_own(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("# fade\nat,direction,rate,loss\n8s,down,40mbit,\n\n12s,,10mbit,2%\n")
    prof = tmp_path / "p.toml"
    prof.write_text('name = "p"\ntimeline = "t.csv"\n[down]\nrate = "50mbit"\n[[events]]\nat = "1s"\noutage = "1s"\n')
    p = load_profile_file(prof)
    assert [e.spec() for e in p.events] == ["at=1s,outage=1s", "at=8s,rate=40mbit", "at=12s,rate=10mbit,loss=2%"]
    assert [e.direction for e in p.events] == ["both", "down", "both"]
    assert p.events[2].origin_line == (str(tmp_path / "t.csv"), 5)
    assert p.timeline == str(tmp_path / "t.csv")


@pytest.mark.parametrize(
    ("csv", "want", "line"),
    [
        ("", "the timeline is empty", None),
        ("rate,loss\n1mbit,1%\n", "no `at` column", 1),
        ("at,rate,rate\n1s,1mbit,2mbit\n", "names a column twice", 1),
        ("at,rate\n1s,1mbit,5\n", "3 cells where the header has 2 columns", 2),
        ("at,rate\n,1mbit\n", "every row needs its time", 2),
        ("at,direction,rate\n1s,up,\n", "the row changes nothing", 2),
    ],
)
def test_bad_timelines_name_the_csv_and_line(tmp_path: Path, csv: str, want: str, line: int | None) -> None:
    (tmp_path / "t.csv").write_text(csv)
    prof = tmp_path / "p.toml"
    prof.write_text('name = "p"\ntimeline = "t.csv"\n')
    with pytest.raises(ConfigError, match=want) as e:
        load_profile_file(prof)
    assert e.value.source == str(tmp_path / "t.csv") and e.value.line == line


def test_a_missing_timeline_names_the_profile_and_its_line(tmp_path: Path) -> None:
    prof = tmp_path / "p.toml"
    prof.write_text('name = "p"\n\ntimeline = "gone.csv"\n')
    with pytest.raises(ConfigError, match="cannot read the timeline .*gone.csv") as e:
        load_profile_file(prof)
    assert (e.value.source, e.value.line, e.value.key) == (str(prof), 3, "timeline")


def test_a_trace_path_is_taken_relative_to_the_profile(tmp_path: Path) -> None:
    prof = tmp_path / "p.toml"
    prof.write_text('name = "p"\n[up]\ntrace = "lte.mm"\n')
    p = load_profile_file(prof)
    assert p.up["trace"] == str(tmp_path / "lte.mm") and p.traced() and p.timed()
    assert find_profile("lte-handover").up["trace"].endswith("wan_profiles/traces/lte-handover-up.mm")


def test_a_rebind_moves_the_clients_address_and_ports_both_ways() -> None:
    p = Profile.model_validate(
        {"name": "r", "events": [{"at": "2s", "rebind": "both"}, {"at": "4s", "rebind": "address"}]}
    )
    up, down = p.events_spec("up"), p.events_spec("down")
    assert up == down
    assert up == (
        "at=2s,nat_v4=198.18.0.1>198.18.0.101,nat_v6=2001:2::1>2001:2::65,nat_port=1000;"
        "at=4s,nat_v4=198.18.0.1>198.18.0.102,nat_v6=2001:2::1>2001:2::66,nat_port=0"
    )
    with pytest.raises(ConfigError, match="a rebind event takes only `at`"):
        validate(
            Profile, {"name": "r", "events": [{"at": "1s", "rebind": "port", "delay": "1ms"}]}, text="", source="p"
        )
    with pytest.raises(ConfigError, match="a rebind event takes only `at`"):
        validate(
            Profile, {"name": "r", "events": [{"at": "1s", "rebind": "port", "direction": "up"}]}, text="", source="p"
        )


def test_a_timeline_rows_schema_errors_name_the_csv_line(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("at,direction,rate\n1s,,1mbit\n2s,sideways,2mbit\n")
    prof = tmp_path / "p.toml"
    prof.write_text('name = "p"\ntimeline = "t.csv"\n')
    with pytest.raises(ConfigError, match="direction") as e:
        load_profile_file(prof)
    assert (e.value.source, e.value.line) == (str(tmp_path / "t.csv"), 3)


def test_a_trace_path_may_hold_spaces_in_its_directory_but_not_commas(tmp_path: Path) -> None:
    d = tmp_path / "My Profiles"
    d.mkdir()
    (d / "p.toml").write_text('name = "p"\n[up]\ntrace = "lte.mm"\n')
    assert load_profile_file(d / "p.toml").up["trace"] == str(d / "lte.mm")
    (d / "q.toml").write_text('name = "q"\n[up]\ntrace = "a,b.mm"\n')
    with pytest.raises(ConfigError, match="cannot be passed to tunbench-link") as e:
        load_profile_file(d / "q.toml")
    assert (e.value.line, e.value.key) == (2, "up") and "trace" in e.value.detail


def test_the_profiles_list_names_traces_by_file_and_keeps_its_brackets() -> None:
    from typer.testing import CliRunner

    from tunbench.cli import app

    res = CliRunner().invoke(app, ["profiles"], terminal_width=250)
    assert res.exit_code == 0, res.output
    assert "[[events]]" in res.output
    from tunbench.cli.catalog import shown

    assert shown(find_profile("lte-handover").up) == "delay=25ms,trace=lte-handover-up.mm,queue=150KB"
    assert shown({}) == "–"
