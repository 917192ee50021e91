"""`tunbench link shell` measures what `run` measures: its namespaces get their settings from the scenario
through the same code as a run's trials (session/network.py, `TopologySpec.with_profile`), and it prints
what the kernel has on entry."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from tunbench.cli.app import app
from tunbench.config.load import load_scenario
from tunbench.link import pair as pair_mod
from tunbench.link.profile import Profile
from tunbench.session import execution, network
from tunbench.topology import settings
from tunbench.topology.build import TopologySpec
from tunbench.trial.attempt import Setup

# the module, not the command function of the same name that tunbench.cli.link exports
shell_mod = importlib.import_module("tunbench.cli.link.shell")


@pytest.fixture
def bbr_allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The host offers cubic and bbr to namespaces, whatever this machine has."""
    for name in ("available", "allowed"):
        (tmp_path / name).write_text("reno cubic bbr\n")
    monkeypatch.setattr(
        settings.check_congestion_control, "__defaults__", (tmp_path / "available", tmp_path / "allowed")
    )


def _scenario(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text('[run]\ntunnels = ["wireguard-go"]\n' + body)
    return path


def test_a_run_takes_its_settings_from_the_shared_function() -> None:
    assert execution.topology_spec is network.topology_spec  # type: ignore[attr-defined]


def test_the_default_scenario_lifts_the_socket_buffers() -> None:
    spec = network.topology_spec(load_scenario(None)[0])
    assert spec.sysctls["net.ipv4.tcp_wmem"].split()[-1] == str(32 * 1024 * 1024)
    assert spec.sysctls["net.ipv4.tcp_rmem"].split()[-1] == str(32 * 1024 * 1024)


def test_the_shell_pair_gets_what_a_trial_gets(
    bbr_allowed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spec link shell's Topology is built with equals Setup.spec() of a run's case over that profile."""
    scenario = load_scenario(
        _scenario(
            tmp_path, '[topology]\nmtu = 1400\ncongestion_control = "cubic"\n[sysctl]\n"net.core.somaxconn" = "512"\n'
        )
    )[0]
    profile = Profile(
        name="p",
        up={"delay": "10ms"},
        down={"delay": "10ms"},
        congestion_control="bbr",
        sysctl={"net.ipv4.tcp_wmem": "4096 16384 1048576"},
    )
    built: list[TopologySpec] = []

    class FakeTopology:
        def __init__(self, ledger: Any, tag: str, spec: TopologySpec, link_builder: Any = None) -> None:
            built.append(spec)

        def __enter__(self) -> FakeTopology:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(pair_mod, "Topology", FakeTopology)
    monkeypatch.setattr(pair_mod, "profile_link_builder", lambda *a: None)
    base = network.topology_spec(scenario)
    with pair_mod.emulated_pair(profile, None, tmp_path, seed=1, base=base):  # type: ignore[arg-type]
        pass
    setup = Setup(None, None, None, topology=base)  # type: ignore[arg-type]
    trial = setup.spec(SimpleNamespace(link=profile))  # type: ignore[arg-type]
    assert built == [trial]
    # the profile wins where it speaks, the scenario elsewhere
    assert trial.congestion_control == "bbr"
    assert trial.mtu == 1400
    assert trial.sysctls == {"net.core.somaxconn": "512", "net.ipv4.tcp_wmem": "4096 16384 1048576"}


def test_without_a_profile_setting_the_scenario_s_stays(bbr_allowed: None) -> None:
    base = TopologySpec(mtu=1500, sysctls={"net.ipv4.tcp_wmem": "4096 16384 33554432"}, congestion_control="cubic")
    spec = pair_mod.pair_spec(Profile(name="plain"), base)
    assert spec == base
    assert pair_mod.pair_spec(Profile(name="plain")) == TopologySpec()  # no base: the kernel's defaults


def test_the_command_passes_the_scenario_s_settings(
    bbr_allowed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def fake_run_shell(profile: Profile, command: list[str], server: list[str] | None, **kw: Any) -> int:
        seen.update(kw, command=command, profile=profile.name)
        return 3

    monkeypatch.setattr(shell_mod, "run_shell", fake_run_shell)
    monkeypatch.setattr("tunbench.link.profile.validate_with_link", lambda p: None)
    res = CliRunner().invoke(app, ["link", "shell", "--profile", "wan-50ms", "--", "sysctl", "net.ipv4.tcp_wmem"])
    assert res.exit_code == 3, res.output
    assert seen["command"] == ["sysctl", "net.ipv4.tcp_wmem"]
    assert seen["base"] == network.topology_spec(load_scenario(None)[0])
    assert seen["source"] == "<default scenario>"

    path = _scenario(tmp_path, '[topology]\ncongestion_control = "bbr"\n')
    res = CliRunner().invoke(app, ["link", "shell", "--scenario", str(path), "--", "true"])
    assert res.exit_code == 3, res.output
    assert seen["base"].congestion_control == "bbr"
    assert seen["base"].sysctls == {}  # a scenario without [sysctl] gives none, in a run as here
    assert seen["source"] == str(path)


def _ns(cc: str, wmem_max: int) -> dict[str, Any]:
    return {
        "congestion_control": cc,
        "tcp_rmem": "4096 131072 33554432",
        "tcp_wmem": f"4096 16384 {wmem_max}",
        "default_qdisc": "fq_codel",
        "interfaces": {"lo": {"mtu": 65536}, "tb1-shlc": {"mtu": 1500}},
    }


def test_entry_lines_say_what_the_kernel_has() -> None:
    lines = shell_mod.settings_lines({"client": _ns("bbr", 33554432), "server": _ns("bbr", 33554432)}, "<d>", "p")
    assert lines == [
        "link shell: the network settings of `tunbench run` (<d>, profile p):",
        "  client, server: tcp_rmem 4096 131072 33554432, tcp_wmem 4096 16384 33554432, congestion control bbr, "
        "default qdisc fq_codel, MTU 1500",
    ]
    split = shell_mod.settings_lines({"client": _ns("bbr", 33554432), "server": _ns("cubic", 4194304)}, "<d>", "p")
    assert split[1].startswith("  client: ") and "congestion control bbr" in split[1]
    assert split[2].startswith("  server: ") and "tcp_wmem 4096 16384 4194304" in split[2]
