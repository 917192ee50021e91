"""examples/ansible/provision.yml against the SSH test hosts (tests/sshhosts.py), with ansible-core, through
one inventory file that tunbench reads too.

The hosts share this machine's /etc, packages and /tmp, so the runs for real stay harmless here: every
package the playbook names is already installed (check mode says so first, or the test stops before a real
run), and tunbench goes into a venv under the test's temporary directory. What it proves: check mode changes
nothing; the real run installs the controller's wheel on each host with a role, and a second run changes
nothing; `tunbench doctor --hosts` on the same file then finds the controller's version and build on both;
a wheel of other sources with the same version number replaces it. Not tried here: installing a package
that is missing (it would change the machine), and the package families other than apt."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.integration.helpers import tunbench
from tests.sshhosts import SUBNET4, SshHosts, ssh_hosts
from tunbench.remote.inventory import load_inventory
from tunbench.remote.protocol import build_id

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = REPO / "examples/ansible/provision.yml"
ROLE_TASK = "tb_host : "


def _ansible_playbook() -> str | None:
    """The venv's ansible-playbook (the dev extra), else one on PATH."""
    beside = Path(sys.executable).parent / "ansible-playbook"
    return str(beside) if beside.exists() else shutil.which("ansible-playbook")


ANSIBLE_PLAYBOOK = _ansible_playbook()
pytestmark = pytest.mark.skipif(
    ANSIBLE_PLAYBOOK is None, reason="ansible-core is not installed (the dev extra has it: make venv)"
)


@dataclass
class Played:
    rc: int
    out: str
    status: dict[tuple[str, str], str]  # (task, host) -> ok, changed, skipping, fatal, failed
    recap: dict[str, dict[str, int]]  # host -> ok, changed, failed, ...

    def of(self, task: str, host: str) -> str:
        return self.status.get((ROLE_TASK + task, host), "absent")


def _parse(out: str) -> tuple[dict[tuple[str, str], str], dict[str, dict[str, int]]]:
    status: dict[tuple[str, str], str] = {}
    recap: dict[str, dict[str, int]] = {}
    task = ""
    for line in out.splitlines():
        if m := re.match(r"^TASK \[(.+)\] \*+$", line):
            task = m.group(1)
        elif m := re.match(r"^(ok|changed|skipping|fatal|failed): \[([^\]]+)\]", line):
            status.setdefault((task, m.group(2)), m.group(1))
        elif m := re.match(r"^(\S+)\s+: ((?:\w+=\d+\s*)+)$", line):
            recap[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return status, recap


@dataclass
class Lab:
    hosts: SshHosts
    work: Path
    inventory: Path
    env: dict[str, str]

    def venv(self, host: str) -> Path:
        return self.work / host / "venv"

    def play(self, *args: str, wheel: Path, check: bool = False, timeout: float = 900) -> Played:
        """The playbook with `wheel`; pip on the hosts installs from the wheelhouse (the test hosts' network
        reaches no package index)."""
        assert ANSIBLE_PLAYBOOK is not None
        pip_args = json.dumps({"tb_pip_args": ["--no-index", "--find-links", str(self.wheelhouse(wheel))]})
        argv = [ANSIBLE_PLAYBOOK, "-i", str(self.inventory), str(PLAYBOOK), "-e", f"tb_wheel={wheel}", "-e", pip_args]
        argv += ["-e", "tb_update_cache=false", *(["--check"] if check else []), *args]
        res = subprocess.run(
            argv, capture_output=True, text=True, env=self.env, cwd=self.work, timeout=timeout, stdin=subprocess.DEVNULL
        )
        out = res.stdout + res.stderr
        return Played(res.returncode, out, *_parse(out))

    def wheelhouse(self, wheel: Path) -> Path:
        """tunbench's dependencies as wheels, fetched here (pip's cache, else the package index)."""
        house = self.work / "wheelhouse"
        if not house.exists():
            res = subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "-d", str(house),
                 str(wheel)],
                capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            assert res.returncode == 0, res.stdout + res.stderr
        return house


def _wheel(tmp: Path, name: str, marker: str = "") -> Path:
    """A wheel of this checkout's sources (no tunbench-link in it: that needs `make wheel`'s Rust build),
    built from a copy so the checkout gets no build/; `marker` makes its sources, so its build, another."""
    tree = tmp / f"{name}-tree"
    shutil.copytree(REPO / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for f in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / f, tree / f)
    if marker:
        init = tree / "src/tunbench/__init__.py"
        init.write_text(init.read_text() + f"# {marker}\n")
    out = tmp / f"{name}-dist"
    res = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check", "-w", str(out),
         str(tree)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    shutil.rmtree(tree)
    (wheel,) = out.glob("tunbench-*.whl")
    return wheel


def _write_inventory(hosts: SshHosts, work: Path) -> Path:
    """One inventory for Ansible and tunbench: ssh reaches the hosts through their ssh_config (Ansible's
    ansible_ssh_common_args, which tunbench gives ssh too); each host with a role gets its venv under `work`
    (the hosts share this machine's /tmp), h2 the link path instead of the venv's tunbench; h3 has no role."""
    inv = {
        "all": {
            "vars": {
                "ansible_ssh_common_args": f"-F {hosts.ssh_config}",
                "ansible_python_interpreter": "/usr/bin/python3",
            },
            "children": {
                "client": {
                    "hosts": {
                        "h1": {
                            "tunbench_address": hosts.address("h1"),
                            "tb_venv": str(work / "h1/venv"),
                            "tunbench_command": str(work / "h1/venv/bin/tunbench"),
                        }
                    }
                },
                "server": {
                    "hosts": {
                        "h2": {
                            "tunbench_address": hosts.address("h2"),
                            "tb_venv": str(work / "h2/venv"),
                            "tb_bin_link": str(work / "h2/bin/tunbench"),
                            "tunbench_command": str(work / "h2/bin/tunbench"),
                        }
                    }
                },
                "bystanders": {"hosts": {"h3": None}},
            },
        }
    }
    path = work / "lab.yml"
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    return path


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    ansible_home = Path.home() / ".ansible"
    had_home = ansible_home.exists()
    work = tmp_path / "ansible"
    (work / "h2/bin").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env |= {
        "ANSIBLE_HOME": str(work / "ansible-home"),  # its local temp files and caches
        "ANSIBLE_REMOTE_TMP": str(work / "remote-tmp"),  # the hosts' temp files (the hosts share /tmp)
        "ANSIBLE_SSH_ARGS": "",  # the hosts' ssh_config runs the control masters, and the fixture ends them
        "ANSIBLE_SSH_TRANSFER_METHOD": "piped",  # the test hosts' sshd has no sftp subsystem
        "ANSIBLE_PIPELINING": "1",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORKS": "5",
    }
    with ssh_hosts(tmp_path, ("h1", "h2", "h3")) as hosts:
        try:
            yield Lab(hosts, work, _write_inventory(hosts, work), env)
            for name in hosts.hosts:
                assert hosts.leftovers(name) == [], name
        finally:
            shutil.rmtree(work, ignore_errors=True)
    assert had_home or not ansible_home.exists(), f"Ansible wrote {ansible_home}"
    assert not list(tmp_path.iterdir())


def test_the_playbook_provisions_the_hosts_of_tunbenchs_inventory(lab: Lab, tmp_path: Path) -> None:
    # tunbench reads the same file: the roles, the ssh arguments, its own variables; the playbook's it ignores
    inv = load_inventory(lab.inventory)
    assert inv.for_role("client").name == "h1" and inv.for_role("server").name == "h2"
    assert inv.host("h3").roles == frozenset()
    assert inv.host("h1").ssh_args == ("-F", str(lab.hosts.ssh_config))
    assert inv.host("h2").command == str(lab.work / "h2/bin/tunbench")
    assert inv.host("h1").address == f"{SUBNET4}.1"

    wheel = _wheel(lab.work, "a")
    assert ANSIBLE_PLAYBOOK is not None
    syntax = subprocess.run(
        [ANSIBLE_PLAYBOOK, "--syntax-check", "-i", str(lab.inventory), str(PLAYBOOK)],
        capture_output=True, text=True, env=lab.env, cwd=lab.work, timeout=120,
    )  # fmt: skip
    assert syntax.returncode == 0, syntax.stdout + syntax.stderr

    # check mode on new hosts: the packages are all here already, the venv would be made; nothing is
    dry = lab.play(wheel=wheel, check=True)
    assert dry.rc == 0, dry.out
    for h in ("h1", "h2"):
        assert dry.recap[h]["failed"] == 0 and dry.recap[h]["unreachable"] == 0, dry.out
        if dry.of("Install the packages", h) != "ok":
            pytest.fail(f"check mode would install packages on {h} (this machine lacks some: make deps); not run "
                        f"for real, as that would change the machine:\n{dry.out}")  # fmt: skip
        assert dry.of("A venv for tunbench", h) == "changed", dry.out
        assert dry.of("The controller's wheel, kept in the venv", h) == "changed", dry.out
        assert dry.of(
            "Ask tunbench's agent for its version and build, with the command the controller will run", h
        ) == ("skipping")
        assert not lab.venv(h).exists()
    assert dry.recap["h3"]["changed"] == 0 and dry.of("The host's package manager", "h3") == "absent", dry.out
    assert not (lab.work / "h2/bin/tunbench").exists()

    # for real: each host with a role gets the wheel in its venv, and answers as the controller does
    real = lab.play(wheel=wheel)
    assert real.rc == 0, real.out
    built = build_id()
    for h in ("h1", "h2"):
        assert real.recap[h]["failed"] == 0, real.out
        assert real.of("Install the packages", h) == "ok", real.out
        assert real.of("Install tunbench and its dependencies", h) == "changed", real.out
        assert real.of("tunbench there is the controller's", h) == "ok", real.out
        assert list((lab.venv(h) / "wheel").iterdir()) == [lab.venv(h) / "wheel" / wheel.name]
    assert f"runs tunbench 0.1.0 (build {built}), as the controller's wheel" in real.out, real.out
    assert (lab.work / "h2/bin/tunbench").resolve() == (lab.venv("h2") / "bin/tunbench").resolve()
    assert real.recap["h3"]["changed"] == 0 and not (lab.work / "h3").exists()

    # again, for real and in check mode: nothing to change; check mode now asks the agent too
    again = lab.play(wheel=wheel)
    assert again.rc == 0, again.out
    assert {h: again.recap[h]["changed"] for h in ("h1", "h2", "h3")} == {"h1": 0, "h2": 0, "h3": 0}, again.out
    dry = lab.play(wheel=wheel, check=True)
    assert dry.rc == 0 and all(dry.recap[h]["changed"] == 0 for h in ("h1", "h2", "h3")), dry.out
    assert dry.of("tunbench there is the controller's", "h1") == "ok", dry.out

    # tunbench, from this checkout, on the same file: both hosts run its version and build
    doctor = tunbench("doctor", "--hosts", str(lab.inventory), timeout=300)
    for h, nxt in (("h1", "h2"), ("h2", "h3")):
        section = doctor.stdout[doctor.stdout.index(f"\n{h}\n") : doctor.stdout.index(f"\n{nxt}\n")]
        assert f"✓ reachable: tunbench 0.1.0 (build {built}), same as here" in section, doctor.stdout

    # a wheel of other sources with the same version number (a new commit): tunbench is replaced
    other = _wheel(lab.work, "b", marker="another commit")
    assert other.name == wheel.name
    moved = lab.play(wheel=other)
    assert moved.rc == 0, moved.out
    for h in ("h1", "h2"):
        assert moved.of("Replace tunbench when the wheel changed (a new commit keeps the version number)", h) == (
            "changed"
        ), moved.out
        assert moved.of("tunbench there is the controller's", h) == "ok", moved.out
    assert f"(build {built})" not in moved.out.split("PLAY [The programs")[1], moved.out
