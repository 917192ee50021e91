"""Which package gives a program on the host's distribution: one table for the four package-manager families
tunbench's users run (apt, dnf, pacman, zypper), the family read from os-release, and the one command that
installs what is missing. Pure over what it is given; only `host_family()` reads a file.

The names come from each distribution's package index (a name `P` is listed at):
  apt     Debian  https://packages.debian.org/P           Ubuntu  https://packages.ubuntu.com/P
  dnf     Fedora  https://packages.fedoraproject.org/pkgs/P/   (RHEL and its rebuilds: the same names)
  pacman  Arch    https://archlinux.org/packages/?name=P   (not in the official repositories: the AUR,
                                                             https://aur.archlinux.org/packages/P)
  zypper  openSUSE https://software.opensuse.org/package/P
A program a family does not package has None there, with `UNPACKAGED` saying where it comes from instead.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import PurePath


class Family(StrEnum):
    APT = "apt"
    DNF = "dnf"
    PACMAN = "pacman"
    ZYPPER = "zypper"


# os-release ID / ID_LIKE words -> family (a derivative names its parent in ID_LIKE: Ubuntu "debian", Rocky
# "rhel centos fedora", Manjaro "arch", openSUSE Leap "suse opensuse")
_FAMILY_OF_ID: dict[str, Family] = {
    "debian": Family.APT,
    "ubuntu": Family.APT,
    "fedora": Family.DNF,
    "rhel": Family.DNF,
    "centos": Family.DNF,
    "arch": Family.PACMAN,
    "suse": Family.ZYPPER,
    "opensuse": Family.ZYPPER,
}

# family -> the command that installs packages, without prompts
INSTALL_COMMAND: dict[Family, str] = {
    Family.APT: "apt-get install -y --no-install-recommends",
    Family.DNF: "dnf install -y",
    Family.PACMAN: "pacman -S --needed --noconfirm",
    Family.ZYPPER: "zypper --non-interactive install",
}

# program (as tunbench runs it; a path by its last part) -> family -> the package(s) that give it.
# strongSwan's charon on Debian needs its plugin packages too (the adapter loads them by name).
_STRONGSWAN_APT = (
    "strongswan-charon",
    "libstrongswan-standard-plugins",
    "libstrongswan-extra-plugins",
    "libcharon-extra-plugins",
)
PACKAGES: dict[str, dict[Family, tuple[str, ...] | None]] = {
    "ip": {
        Family.APT: ("iproute2",),
        Family.DNF: ("iproute",),
        Family.PACMAN: ("iproute2",),
        Family.ZYPPER: ("iproute2",),
    },
    "ping": {
        Family.APT: ("iputils-ping",),
        Family.DNF: ("iputils",),
        Family.PACMAN: ("iputils",),
        Family.ZYPPER: ("iputils",),
    },
    # openSUSE's `iperf` is iperf 3 (it installs /usr/bin/iperf3)
    "iperf3": {Family.APT: ("iperf3",), Family.DNF: ("iperf3",), Family.PACMAN: ("iperf3",), Family.ZYPPER: ("iperf",)},
    "irtt": {Family.APT: ("irtt",), Family.DNF: None, Family.PACMAN: None, Family.ZYPPER: None},
    # Debian's netperf is in its non-free component, which `apt-get install` alone does not reach (UNPACKAGED)
    "netperf": {Family.APT: None, Family.DNF: None, Family.PACMAN: None, Family.ZYPPER: None},
    "netserver": {Family.APT: None, Family.DNF: None, Family.PACMAN: None, Family.ZYPPER: None},
    # Debian main: sockperf (rr's and udp-rr's generator = "sockperf")
    "sockperf": {Family.APT: ("sockperf",), Family.DNF: None, Family.PACMAN: None, Family.ZYPPER: None},
    "wg": {
        Family.APT: ("wireguard-tools",),
        Family.DNF: ("wireguard-tools",),
        Family.PACMAN: ("wireguard-tools",),
        Family.ZYPPER: ("wireguard-tools",),
    },
    "wireguard-go": {Family.APT: ("wireguard-go",), Family.DNF: None, Family.PACMAN: None, Family.ZYPPER: None},
    "openvpn": {
        Family.APT: ("openvpn",),
        Family.DNF: ("openvpn",),
        Family.PACMAN: ("openvpn",),
        Family.ZYPPER: ("openvpn",),
    },
    "openssl": {
        Family.APT: ("openssl",),
        Family.DNF: ("openssl",),
        Family.PACMAN: ("openssl",),
        Family.ZYPPER: ("openssl",),
    },
    "ssh": {
        Family.APT: ("openssh-client",),
        Family.DNF: ("openssh-clients",),
        Family.PACMAN: ("openssh",),
        Family.ZYPPER: ("openssh-clients",),
    },
    "ssh-keygen": {
        Family.APT: ("openssh-client",),
        Family.DNF: ("openssh",),
        Family.PACMAN: ("openssh",),
        Family.ZYPPER: ("openssh-common",),
    },
    "sshd": {
        Family.APT: ("openssh-server",),
        Family.DNF: ("openssh-server",),
        Family.PACMAN: ("openssh",),
        Family.ZYPPER: ("openssh-server",),
    },
    "socat": {Family.APT: ("socat",), Family.DNF: ("socat",), Family.PACMAN: ("socat",), Family.ZYPPER: ("socat",)},
    "stunnel": {
        Family.APT: ("stunnel4",),
        Family.DNF: ("stunnel",),
        Family.PACMAN: ("stunnel",),
        Family.ZYPPER: ("stunnel",),
    },
    "charon": {
        Family.APT: _STRONGSWAN_APT,
        Family.DNF: ("strongswan",),
        Family.PACMAN: ("strongswan",),
        Family.ZYPPER: ("strongswan",),
    },
    "swanctl": {
        Family.APT: ("strongswan-swanctl",),
        Family.DNF: ("strongswan",),
        Family.PACMAN: ("strongswan",),
        Family.ZYPPER: ("strongswan",),
    },
    "fastd": {Family.APT: ("fastd",), Family.DNF: ("fastd",), Family.PACMAN: None, Family.ZYPPER: None},
    "unshare": {
        Family.APT: ("util-linux",),
        Family.DNF: ("util-linux",),
        Family.PACMAN: ("util-linux",),
        Family.ZYPPER: ("util-linux",),
    },
    "mount": {
        Family.APT: ("mount",),
        Family.DNF: ("util-linux",),
        Family.PACMAN: ("util-linux",),
        Family.ZYPPER: ("util-linux",),
    },
    "uname": {
        Family.APT: ("coreutils",),
        Family.DNF: ("coreutils",),
        Family.PACMAN: ("coreutils",),
        Family.ZYPPER: ("coreutils",),
    },
    "perf": {Family.APT: ("linux-perf",), Family.DNF: ("perf",), Family.PACMAN: ("perf",), Family.ZYPPER: ("perf",)},
}

# where a program comes from when a family has no package for it (or it is in no distribution)
UNPACKAGED: dict[str, str] = {
    "irtt": "go install github.com/heistp/irtt/cmd/irtt@latest (Arch: the AUR's irtt)",
    "netperf": (
        "Debian: the netperf package, in the non-free component (`make netperf` in a checkout enables it: "
        "docs/install.md); Ubuntu: netperf (multiverse); elsewhere: build "
        "https://github.com/HewlettPackard/netperf (Arch: the AUR's netperf)"
    ),
    "netserver": "netperf's server: the netperf package (see netperf)",
    "sockperf": "build it from https://github.com/Mellanox/sockperf (./autogen.sh && ./configure && make)",
    "wireguard-go": "build it from https://git.zx2c4.com/wireguard-go (make; Arch: the AUR's wireguard-go)",
    "fastd": "build it from https://github.com/neocturne/fastd (Arch: the AUR's fastd)",
    "boringtun-cli": "cargo install boringtun-cli (`make tools` in a checkout)",
    "tunbench-link": "tunbench's wheel carries it (pip install tunbench-*.whl); in a checkout: make build",
    "inferno-flamegraph": "cargo install inferno (`make tools` in a checkout)",
}


def family_of(os_release: Mapping[str, str]) -> Family | None:
    """The package family of an os-release (its ID first, then each ID_LIKE word), None if none is known."""
    words = [os_release.get("ID", ""), *os_release.get("ID_LIKE", "").split()]
    for word in words:
        w = word.strip().lower()
        if w in _FAMILY_OF_ID:
            return _FAMILY_OF_ID[w]
        if w.startswith("opensuse") or w == "sles":
            return Family.ZYPPER
    return None


def host_os_release() -> dict[str, str]:
    """This host's os-release (/etc/os-release, else /usr/lib/os-release); empty when there is none."""
    try:
        return platform.freedesktop_os_release()
    except OSError:
        return {}


def host_family() -> Family | None:
    return family_of(host_os_release())


def _key(program: str) -> str:
    return PurePath(program).name


def packages_for(program: str, family: Family) -> tuple[str, ...] | None:
    """The package(s) giving `program` (a name or a path) on `family`; None where the family has none or
    the program is not in the table."""
    return PACKAGES.get(_key(program), {}).get(family)


@dataclass(frozen=True)
class InstallPlan:
    """What to do about missing programs on one family: the one command, and what no package gives."""

    family: Family
    packages: tuple[str, ...]  # in the order first needed, each once
    unpackaged: dict[str, str]  # program -> where it comes from

    @property
    def command(self) -> str:
        return f"{INSTALL_COMMAND[self.family]} {' '.join(self.packages)}" if self.packages else ""


def install_plan(programs: Iterable[str], family: Family) -> InstallPlan:
    pkgs: dict[str, None] = {}
    unpackaged: dict[str, str] = {}
    for program in programs:
        found = packages_for(program, family)
        if found:
            pkgs.update(dict.fromkeys(found))
        else:
            name = _key(program)
            unpackaged[name] = UNPACKAGED.get(name, "not in tunbench's package table: install it by hand")
    return InstallPlan(family, tuple(pkgs), unpackaged)


def fix_text(program: str, family: Family | None) -> str:
    """One missing program's fix line for `doctor`."""
    name = _key(program)
    if family is None:
        known = PACKAGES.get(name)
        if known and (debian := known.get(Family.APT)):
            return f"install {' '.join(debian)} (its Debian/Ubuntu name; this distribution is not in tunbench's table)"
        return UNPACKAGED.get(name, f"install {name}")
    found = packages_for(program, family)
    if found:
        return f"{INSTALL_COMMAND[family]} {' '.join(found)}"
    return f"no {family} package: " + UNPACKAGED.get(name, "install it by hand")
