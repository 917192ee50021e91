"""examples/ansible/: the playbook that provisions the hosts of an inventory tunbench reads. Its YAML parses,
it knows every role group tunbench's inventory reader knows, it uses no `tunbench_*` name tunbench does not
read, and its program and package tables are tunbench's own (the tunnels' and workloads' `requires`,
doctor/packages.py). Running it against hosts: tests/integration/test_ansible.py.

Regenerate the tables after a change to tunbench's: `python tests/unit/test_ansible_playbook.py >
examples/ansible/roles/tb_host/vars/main.yml`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path, PurePath
from typing import Any

import pytest
import yaml

from tunbench import workloads
from tunbench.config.load import load_scenario
from tunbench.doctor.packages import PACKAGES, UNPACKAGED
from tunbench.host import HOST_TOOLS
from tunbench.remote.inventory import ROLES, TUNBENCH_VARS, load_inventory
from tunbench.tunnels.registry import builtin_names, parse_ref, required_programs

REPO = Path(__file__).resolve().parents[2]
ANSIBLE = REPO / "examples/ansible"
ROLE = ANSIBLE / "roles/tb_host"
PLAYBOOK = ANSIBLE / "provision.yml"
LAB = REPO / "examples/hosts/lab.ini"
HEADER = """\
# tunbench's own tables, for the tb_host role: which programs tunbench runs on a host (its own, each
# built-in tunnel's `requires`, each workload's; a path by its last part), and which package gives each on
# the four package families `tunbench doctor` knows (src/tunbench/doctor/packages.py; a program a family does
# not package has no entry there, and tb_unpackaged says where it comes from). Generated:
#   python tests/unit/test_ansible_playbook.py > examples/ansible/roles/tb_host/vars/main.yml
# tests/unit/test_ansible_playbook.py fails when these drift from tunbench's. Add packages with
# tb_extra_packages (defaults/main.yml), not here.
"""


def _name(program: str) -> str:
    return PurePath(program).name


def tables() -> dict[str, Any]:
    """The role's vars/main.yml, from tunbench's tables."""
    tunnels = {n: list(dict.fromkeys(_name(p) for p in required_programs(parse_ref(n)))) for n in builtin_names()}
    loads = {kind: [_name(p) for p in w.requires] for kind, w in workloads.REGISTRY.items()}
    count_work = ["perf"]
    programs = sorted(
        {
            *HOST_TOOLS,
            *count_work,
            *(p for ps in tunnels.values() for p in ps),
            *(p for ps in loads.values() for p in ps),
        }
    )
    return {
        "tb_tunbench_programs": list(HOST_TOOLS),
        "tb_count_work_programs": count_work,
        "tb_tunnel_programs": tunnels,
        "tb_workload_programs": loads,
        "tb_program_packages": {
            p: {family.value: list(names) for family, names in PACKAGES.get(p, {}).items() if names} for p in programs
        },
        "tb_unpackaged": {p: UNPACKAGED[p] for p in programs if p in UNPACKAGED},
    }


def render() -> str:
    """tables() as YAML: short lists inline, the prose of tb_unpackaged one line each."""
    return HEADER + "".join(
        yaml.safe_dump({k: v}, sort_keys=False, default_flow_style=False if k == "tb_unpackaged" else None, width=120)
        for k, v in tables().items()
    )


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def test_the_playbook_and_its_role_parse() -> None:
    plays = _load(PLAYBOOK)
    assert [p["hosts"] for p in plays] == ["localhost", "all"]
    assert plays[1]["roles"] == ["tb_host"]
    for part in ("defaults", "vars", "tasks"):
        assert _load(ROLE / part / "main.yml"), part


def test_the_role_knows_every_role_group_of_the_inventory_reader() -> None:
    assert _load(ROLE / "defaults/main.yml")["tb_roles"] == list(ROLES)
    assert set(_load(ROLE / "defaults/main.yml")["tb_role_packages"]) == set(ROLES)


def test_it_uses_only_the_tunbench_variables_tunbench_reads() -> None:
    """tunbench refuses an inventory with a tunbench_* name it does not know: the playbook's own variables
    must not look like one, and the ones it reads must be tunbench's."""
    text = "".join(p.read_text() for p in sorted(ANSIBLE.rglob("*.yml")))
    used = set(re.findall(r"\btunbench_[a-z0-9_]+", text))
    assert used <= TUNBENCH_VARS, used - TUNBENCH_VARS
    assert {"tunbench_command", "tunbench_roles"} <= used


def test_the_tables_are_tunbenchs() -> None:
    assert _load(ROLE / "vars/main.yml") == tables(), f"regenerate them:\n{__doc__}"


def test_every_program_has_a_package_or_says_where_it_comes_from() -> None:
    t = tables()
    for program, families in t["tb_program_packages"].items():
        assert families.get("apt") or program in t["tb_unpackaged"], program


def test_the_default_tunnels_are_the_default_scenarios() -> None:
    scenario, _, _ = load_scenario(None)
    assert _load(ROLE / "defaults/main.yml")["tb_tunnels"] == list(scenario.run.tunnels)


def _ansible(program: str) -> str:
    """The venv's ansible-core program (the dev extra), else one on PATH; a skip where there is none."""
    beside = Path(sys.executable).parent / program
    found = str(beside) if beside.exists() else shutil.which(program)
    if found is None:
        pytest.skip("ansible-core is not installed (the dev extra has it: make venv)")
    return found


def _ansible_env(tmp: Path) -> dict[str, str]:
    """Ansible's state under `tmp`, nothing of the caller's Ansible settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    return {**env, "ANSIBLE_HOME": str(tmp / "ansible-home"), "ANSIBLE_NOCOLOR": "1"}


def test_ansible_reads_the_example_inventory_as_tunbench_does(tmp_path: Path) -> None:
    inventory = _ansible("ansible-inventory")
    inv = load_inventory(LAB)
    res = subprocess.run(
        [inventory, "-i", str(LAB), "--list"], capture_output=True, text=True, env=_ansible_env(tmp_path), timeout=60
    )
    assert res.returncode == 0, res.stderr
    seen = yaml.safe_load(res.stdout)  # JSON
    for role in ROLES:
        assert sorted(seen.get(role, {}).get("hosts", [])) == sorted(h.name for h in inv.hosts if role in h.roles)
    for h in inv.hosts:
        assert seen["_meta"]["hostvars"][h.name]["tunbench_command"] == h.command


def test_the_playbook_passes_ansibles_syntax_check(tmp_path: Path) -> None:
    playbook = _ansible("ansible-playbook")
    res = subprocess.run(
        [playbook, "--syntax-check", "-i", str(LAB), str(PLAYBOOK)],
        capture_output=True,
        text=True,
        env=_ansible_env(tmp_path),
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr


if __name__ == "__main__":
    print(render(), end="")
