"""Profile and scenario sysctls are applied as root: hostile keys and values are refused before anything
runs, and nothing is ever passed through a shell (issue 9, item 13)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tunbench.errors import ConfigError
from tunbench.link.profile import load_profile_file
from tunbench.topology import settings, sysctl

HOSTILE_VALUES = [
    "1; touch /tmp/pwned",
    "1'; touch /tmp/tunbench-pwned; echo '",
    "$(id)",
    "`id`",
    "1\n2",
    "4096 131072\ttouch",
    "1 && id",
    "1 | id",
    "bbr > /etc/x",
    "../../etc/passwd",
    "",
    " 1",
    "1  2",
    "BBR",
]
HOSTILE_KEYS = [
    "net.ipv4/../../../etc/shadow",
    "net/../../etc/passwd",
    "net.ipv4..tcp_rmem",
    "net.ipv4.tcp_rmem; id",
    "net.ipv4.$(id)",
    "net.ipv4.`id`",
    "net.ipv4.tcp_rmem\n",
    "kernel.panic",
    "vm.swappiness",
    "../../net/ipv4/ip_forward",
    "net.",
    "net",
    "net.ipv4.conf.eth0-x.rp_filter",
    "NET.ipv4.tcp_rmem",
]
GOOD = {
    "net.ipv4.tcp_rmem": "4096 131072 33554432",
    "net.core.rmem_max": "33554432",
    "net.ipv4.tcp_congestion_control": "bbr",
    "net.core.default_qdisc": "fq_codel",
    "net.ipv4.conf.all.rp_filter": "0",
    "net.ipv4.ip_local_port_range": "10000 60000",
    "net.ipv4.tcp_notsent_lowat": "-1",
}


@pytest.fixture
def nothing_runs(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Record any attempt to start a process or enter a namespace: there must be none."""
    calls: list[object] = []

    def refuse(*a: object, **k: object) -> None:
        calls.append(a)
        raise AssertionError(f"tried to run something: {a}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(sysctl, "run_in_netns", refuse, raising=False)
    return calls


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_hostile_values_are_refused_before_anything_runs(value: str, nothing_runs: list[object]) -> None:
    with pytest.raises(ConfigError) as e:
        sysctl.apply("tb000000-xc", {"net.ipv4.tcp_rmem": value})
    assert e.value.key == "sysctl.net.ipv4.tcp_rmem"
    assert nothing_runs == []


@pytest.mark.parametrize("key", HOSTILE_KEYS)
def test_hostile_keys_are_refused_before_anything_runs(key: str, nothing_runs: list[object]) -> None:
    with pytest.raises(ConfigError) as e:
        sysctl.apply("tb000000-xc", {key: "1"})
    assert e.value.key == f"sysctl.{key}"
    assert nothing_runs == []


def test_one_bad_setting_stops_all_of_them(nothing_runs: list[object]) -> None:
    with pytest.raises(ConfigError, match="not allowed"):
        sysctl.apply("tb000000-xc", {"net.core.rmem_max": "1", "net.core.wmem_max": "$(id)"})
    assert nothing_runs == []


def test_good_settings_pass_the_check_and_are_written_without_a_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in GOOD.items():
        assert sysctl.check(key, value) == "/proc/sys/" + key.replace(".", "/")
    entered: list[str] = []

    def fake_netns(name: str, fn: object) -> dict[str, str]:
        entered.append(name)
        return dict(GOOD)  # what the kernel would give back

    monkeypatch.setattr(sysctl, "run_in_netns", fake_netns)
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: pytest.fail(f"a process was started: {a}"))
    assert sysctl.apply("tb000000-xc", GOOD) == GOOD
    assert entered == ["tb000000-xc"]


@pytest.mark.parametrize(
    ("key", "value"),
    [("net.ipv4.tcp_rmem", "1; touch /tmp/pwned"), ("net.ipv4.tcp_rmem", "$(id)"), ("net.ipv4/../../x", "1")],
)
def test_a_profile_with_hostile_sysctls_is_refused_at_load(tmp_path: Path, key: str, value: str) -> None:
    path = tmp_path / "evil.toml"
    quoted_value = value.replace("\\", "\\\\").replace('"', '\\"')
    path.write_text(f'name = "evil"\nemulated = false\n\n[sysctl]\n"{key}" = "{quoted_value}"\n')
    with pytest.raises(ConfigError) as e:
        load_profile_file(path)
    assert e.value.key == "sysctl"
    assert key in str(e.value)


# ---- congestion control: parsing and validation (issue 9, item 7) --------------------------------------


@pytest.fixture
def host_cc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    available, allowed = tmp_path / "available", tmp_path / "allowed"
    available.write_text("reno bbr cubic\n")
    allowed.write_text("reno bbr\n")
    monkeypatch.setattr(settings, "AVAILABLE_CC", available)
    monkeypatch.setattr(settings, "ALLOWED_CC", allowed)
    monkeypatch.setattr(settings.check_congestion_control, "__defaults__", (available, allowed))
    return available, allowed


def test_congestion_control_must_be_available_and_allowed(host_cc: tuple[Path, Path]) -> None:
    assert settings.check_congestion_control("bbr") == "bbr"
    assert settings.check_congestion_control("reno") == "reno"
    with pytest.raises(ValueError, match=r"'vegas' is not available.*reno bbr cubic"):
        settings.check_congestion_control("vegas")
    with pytest.raises(ValueError, match=r"'cubic' is available but not allowed.*reno bbr"):
        settings.check_congestion_control("cubic")
    with pytest.raises(ValueError, match="not a congestion control name"):
        settings.check_congestion_control("bbr; id")


def test_scenario_topology_congestion_control(tmp_path: Path, host_cc: tuple[Path, Path]) -> None:
    from tunbench.config.schema import Scenario
    from tunbench.tomlfile import validate

    text = '[topology]\nmtu = 1500\ncongestion_control = "vegas"\n'
    with pytest.raises(ConfigError) as e:
        validate(Scenario, {"topology": {"mtu": 1500, "congestion_control": "vegas"}}, text=text, source="s.toml")
    assert e.value.key == "topology.congestion_control"
    assert e.value.line == 3
    assert "reno bbr cubic" in str(e.value)
    ok = validate(Scenario, {"topology": {"congestion_control": "reno"}}, text="", source="s.toml")
    assert ok.topology.congestion_control == "reno"
    assert validate(Scenario, {}, text="", source="s.toml").topology.congestion_control is None


def test_profile_congestion_control(tmp_path: Path, host_cc: tuple[Path, Path]) -> None:
    path = tmp_path / "p.toml"
    path.write_text('name = "p"\nemulated = false\ncongestion_control = "cubic"\n')
    with pytest.raises(ConfigError) as e:
        load_profile_file(path)
    assert e.value.key == "congestion_control"
    assert e.value.line == 3
    assert "tcp_allowed_congestion_control" in str(e.value)
    path.write_text('name = "p"\nemulated = false\ncongestion_control = "reno"\n')
    assert load_profile_file(path).congestion_control == "reno"


def test_topology_spec_pins_congestion_control_for_every_namespace(host_cc: tuple[Path, Path]) -> None:
    from tunbench.topology.build import TopologySpec

    spec = TopologySpec(sysctls={"net.core.rmem_max": "1000000"}, congestion_control="reno")
    assert spec.namespace_sysctls() == {"net.core.rmem_max": "1000000", "net.ipv4.tcp_congestion_control": "reno"}
    assert TopologySpec().namespace_sysctls() == {}
    with pytest.raises(ConfigError, match="contradicts"):
        TopologySpec(sysctls={"net.ipv4.tcp_congestion_control": "bbr"}, congestion_control="reno")
    with pytest.raises(ConfigError) as e:
        TopologySpec(congestion_control="cubic")
    assert e.value.key == "congestion_control"
