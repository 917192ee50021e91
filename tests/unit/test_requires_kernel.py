"""`requires_kernel` in the adapter format: how a kernel module is found (read only, from a fake root), what
`tunbench tunnels`, `doctor` and a dry run say when one is missing, and the new built-ins' templates."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.unit.test_adapters import test_builtin_templates_only_use_known_variables as _templates_ok
from tunbench.errors import ConfigError
from tunbench.tunnels import registry
from tunbench.tunnels.adapter import load_adapter
from tunbench.tunnels.registry import kernel_module_available, missing_requirements, missing_text, parse_ref

NEW = ["boringtun", "wireguard-kernel", "ssh-tun", "vxlan", "gre", "ipip"]


@pytest.mark.parametrize("name", NEW)
def test_new_builtins_use_known_variables(name: str) -> None:
    _templates_ok(name)


def test_new_builtins_declare_what_they_need() -> None:
    kernel = {n: parse_ref(n).adapter.spec.requires_kernel for n in NEW}
    assert kernel == {
        "boringtun": [],
        "ssh-tun": [],
        "wireguard-kernel": ["wireguard"],
        "vxlan": ["vxlan"],
        "gre": ["ip_gre"],
        "ipip": ["ipip"],
    }
    assert parse_ref("boringtun").adapter.spec.multi is not None, "the clients workload needs [multi]"


def modules_dir(root: Path) -> Path:
    d = root / "lib/modules" / os.uname().release
    d.mkdir(parents=True)
    return d


def test_a_module_is_found_in_sysfs_builtin_or_dep(tmp_path: Path) -> None:
    assert not kernel_module_available("wireguard", tmp_path)
    (tmp_path / "sys/module/ip_gre").mkdir(parents=True)  # loaded, or built in with parameters
    assert kernel_module_available("ip_gre", tmp_path) and kernel_module_available("ip-gre", tmp_path)
    d = modules_dir(tmp_path)
    (d / "modules.builtin").write_text("kernel/drivers/net/vxlan/vxlan.ko\n")
    (d / "modules.dep").write_text(
        "kernel/drivers/net/wireguard/wireguard.ko.zst: kernel/net/ipv4/udp_tunnel.ko.zst\n"
        "kernel/net/ipv4/udp_tunnel.ko.zst:\n"
    )
    assert kernel_module_available("vxlan", tmp_path)
    assert kernel_module_available("wireguard", tmp_path)  # loadable: `ip link add` loads it on demand
    assert kernel_module_available("udp_tunnel", tmp_path)
    assert not kernel_module_available("ipip", tmp_path)
    assert not kernel_module_available("wire", tmp_path), "whole names only"


def test_missing_modules_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "kernel_module_available", lambda name, root=Path("/"): name != "wireguard")
    miss = missing_requirements(parse_ref("wireguard-kernel[label=k]"))
    assert "kernel module wireguard" in miss
    assert "kernel module missing: wireguard" in missing_text(miss)
    assert missing_text(["wg", "kernel module wireguard"]) == "missing wg; kernel module missing: wireguard"

    from tunbench.cli import app
    from tunbench.doctor import checks

    (check,) = [c for c in checks() if c.name == "tunnel wireguard-kernel"]
    assert not check.ok and check.detail.endswith("kernel module missing: wireguard")
    assert "modprobe wireguard" in check.fix
    out = CliRunner().invoke(app, ["tunnels"]).output
    (row,) = [line for line in out.splitlines() if "wireguard-kernel" in line]
    assert "kernel module missing" in row  # the table may wrap the module's name onto the next line


def test_a_dry_run_notes_the_missing_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "kernel_module_available", lambda name, root=Path("/"): False)
    from tunbench.cli import app

    res = CliRunner().invoke(app, ["run", "-t", "vxlan", "--dry-run"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "vxlan needs kernel module vxlan" in res.output


def test_requires_kernel_names_are_checked(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nlayer = "l3"\nrequires_kernel = ["wire guard"]\n[target]\naddress = "x"\n')
    with pytest.raises(ConfigError, match="requires_kernel"):
        load_adapter(bad)
