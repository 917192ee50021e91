"""`tunbench doctor` names each missing program's package on the host's distribution family, read from
os-release, and prints the one command that installs them all (doctor/packages.py)."""

from __future__ import annotations

import shutil
from pathlib import PurePath

import pytest
from typer.testing import CliRunner

from tunbench import doctor, workloads
from tunbench.cli import app
from tunbench.doctor import packages
from tunbench.doctor.packages import PACKAGES, UNPACKAGED, Family, family_of, install_plan
from tunbench.host import HOST_TOOLS
from tunbench.tunnels.registry import builtin_names, parse_ref, required_programs

# os-release fields as these distributions ship them
OS_RELEASES = {
    "debian-12": ({"ID": "debian", "VERSION_ID": "12"}, Family.APT),
    "ubuntu-24.04": ({"ID": "ubuntu", "ID_LIKE": "debian"}, Family.APT),
    "linuxmint": ({"ID": "linuxmint", "ID_LIKE": "ubuntu debian"}, Family.APT),
    "fedora-41": ({"ID": "fedora", "VERSION_ID": "41"}, Family.DNF),
    "rhel-9": ({"ID": "rhel", "ID_LIKE": "fedora"}, Family.DNF),
    "rocky-9": ({"ID": "rocky", "ID_LIKE": "rhel centos fedora"}, Family.DNF),
    "arch": ({"ID": "arch"}, Family.PACMAN),
    "manjaro": ({"ID": "manjaro", "ID_LIKE": "arch"}, Family.PACMAN),
    "tumbleweed": ({"ID": "opensuse-tumbleweed", "ID_LIKE": "opensuse suse"}, Family.ZYPPER),
    "leap-15.6": ({"ID": "opensuse-leap", "ID_LIKE": "suse opensuse"}, Family.ZYPPER),
    "sles-15": ({"ID": "sles", "ID_LIKE": "suse"}, Family.ZYPPER),
    "alpine": ({"ID": "alpine"}, None),
    "no os-release": ({}, None),
}


@pytest.mark.parametrize("name", OS_RELEASES)
def test_the_family_comes_from_id_then_id_like(name: str) -> None:
    fields, family = OS_RELEASES[name]
    assert family_of(fields) == family


# the programs of a wireguard-go + ssh-tun + stunnel + latency host, and what each family installs for them
PROGRAMS = ["ping", "iperf3", "wg", "/usr/sbin/sshd", "ssh", "stunnel", "/usr/lib/ipsec/charon"]
EXPECTED = {
    Family.APT: "apt-get install -y --no-install-recommends iputils-ping iperf3 wireguard-tools openssh-server "
    "openssh-client stunnel4 strongswan-charon libstrongswan-standard-plugins libstrongswan-extra-plugins "
    "libcharon-extra-plugins",
    Family.DNF: "dnf install -y iputils iperf3 wireguard-tools openssh-server openssh-clients stunnel strongswan",
    Family.PACMAN: "pacman -S --needed --noconfirm iputils iperf3 wireguard-tools openssh stunnel strongswan",
    Family.ZYPPER: "zypper --non-interactive install iputils iperf wireguard-tools openssh-server openssh-clients "
    "stunnel strongswan",
}


@pytest.mark.parametrize("family", list(Family))
def test_one_install_command_per_family(family: Family) -> None:
    plan = install_plan(PROGRAMS, family)
    assert plan.command == EXPECTED[family]
    assert plan.unpackaged == {}


@pytest.mark.parametrize("family", list(Family))
def test_what_a_family_does_not_package_says_where_it_comes_from(family: Family) -> None:
    plan = install_plan(["iperf3", "irtt", "boringtun-cli"], family)
    # irtt: packaged for apt only, built with go elsewhere
    assert plan.packages == ("iperf3" if family != Family.ZYPPER else "iperf", *("irtt",) * (family == Family.APT))
    assert ("irtt" in plan.unpackaged) == (family != Family.APT)
    assert plan.unpackaged["boringtun-cli"].startswith("cargo install boringtun-cli")


def test_the_table_covers_every_program_doctor_checks() -> None:
    """A new tunnel or workload that needs a program the table lacks fails here, not on a user's machine."""
    programs = set(HOST_TOOLS)
    programs |= {tool for w in workloads.REGISTRY.values() for tool in w.requires}
    programs |= {PurePath(p).name for name in builtin_names() for p in required_programs(parse_ref(name))}
    assert programs - set(PACKAGES) - set(UNPACKAGED) == set()
    for program, by_family in PACKAGES.items():
        assert set(by_family) == set(Family), program
        for family, names in by_family.items():
            assert names is None or (names and all(n and " " not in n for n in names)), (program, family)
            assert names is not None or program in UNPACKAGED, (program, family)


def test_doctor_fixes_name_the_hosts_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    gone = {"iperf3", "irtt", "wg", "wireguard-go"}
    which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda prog, *a, **k: None if PurePath(prog).name in gone else which(prog))
    found = {c.name: c for c in doctor.checks(Family.DNF)}
    assert found["workload rrul"].fix.startswith("dnf install -y iperf3")
    assert "irtt: go install github.com/heistp/irtt" in found["workload rrul"].fix
    assert found["tunnel wireguard-go"].fix.startswith("dnf install -y wireguard-tools")
    assert "apt-get" not in "".join(c.fix for c in found.values())
    lines = doctor.install_lines(list(found.values()), Family.DNF)
    assert lines[0] == "install them all (dnf): dnf install -y iperf3 wireguard-tools"
    assert any(line.startswith("wireguard-go: build it from") for line in lines[1:])
    assert doctor.install_lines(list(found.values()), None)[0].endswith(": iperf3, irtt, wg, wireguard-go")


def test_doctor_prints_the_install_line_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packages, "host_os_release", lambda: {"ID": "arch"})
    missing = doctor.Check("workload iperf3", False, "missing iperf3", "", ("iperf3", "irtt", "socat", "openvpn"))
    monkeypatch.setattr(doctor, "checks", lambda family=None: [missing])
    res = CliRunner().invoke(app, ["doctor"], env={"COLUMNS": "40"})
    assert res.exit_code == 1
    assert "install them all (pacman): pacman -S --needed --noconfirm iperf3 socat openvpn\n" in res.output
    assert "irtt: go install" in res.output
