"""IPsec adapters (issue 28 #13, #14): ipsec-xfrm's ESP keys never go on a command line (where `ps` shows
them and a failed command's text carries them into the trial's error, the store and the report), and
readiness checks the kernel's ESP, naming strongSwan's userspace datapath as the way without it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunbench.cli import app
from tunbench.errors import CommandFailed
from tunbench.tunnels import registry
from tunbench.tunnels.registry import kernel_modules, missing_requirements, missing_text, parse_ref
from tunbench.tunnels.template import render, render_argv

SECRETS = {"key_up": "feedc0de" * 9, "key_down": "0badcafe" * 9}


class Every(dict[str, str]):
    """Template variables: the two keys as given, every other name as itself."""

    def __contains__(self, key: object) -> bool:
        return True

    def __missing__(self, key: str) -> str:
        return SECRETS.get(key, key)


def commands(name: str) -> list[str]:
    spec = parse_ref(name).adapter.spec
    out = [k.run for k in spec.keys] + ([spec.version] if spec.version else [])
    for role in (spec.server, spec.client):
        out += [*role.before, *role.after, *([role.daemon] if role.daemon else [])]
        out += [p.run for p in role.ready if p.kind == "cmd"]
    return out


def test_ipsec_xfrm_keys_are_in_a_file_never_on_a_command_line() -> None:
    variables = Every()
    for cmd in commands("ipsec-xfrm"):
        argv = render_argv(cmd, variables)
        assert not any(s in arg for s in SECRETS.values() for arg in argv), argv
        failed = CommandFailed(argv, 2, "RTNETLINK answers: Protocol not supported", what="ipsec-xfrm")
        assert not any(s in str(failed) for s in SECRETS.values())  # what a failed trial stores
    (batch,) = [f for f in parse_ref("ipsec-xfrm").adapter.spec.files if f.path == "sa.batch"]
    content = render(batch.content, variables)
    assert all(f"0x{s}" in content for s in SECRETS.values()) and batch.mode == "0600"
    assert any("ip -batch {tmp}/sa.batch" in c for c in commands("ipsec-xfrm"))


def no_esp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "kernel_module_available", lambda name, root=Path("/"): name != "esp4")


def test_readiness_checks_the_kernels_esp(monkeypatch: pytest.MonkeyPatch) -> None:
    assert kernel_modules(parse_ref("ipsec-xfrm")) == ["esp4"]
    assert kernel_modules(parse_ref("strongswan")) == ["esp4"]  # datapath=kernel, the default
    assert kernel_modules(parse_ref("strongswan[datapath=libipsec]")) == []
    no_esp(monkeypatch)
    for name in ("ipsec-xfrm", "strongswan"):
        text = missing_text(missing_requirements(parse_ref(name)))
        assert text.startswith("kernel module missing: esp4 (") and "datapath=libipsec" in text, text
    assert missing_requirements(parse_ref("strongswan[datapath=libipsec]")) == []
    monkeypatch.setattr(registry, "kernel_module_available", lambda name, root=Path("/"): True)
    assert missing_requirements(parse_ref("ipsec-xfrm")) == missing_requirements(parse_ref("strongswan")) == []


def test_tunnels_doctor_and_a_dry_run_say_how_to_run_without_kernel_esp(monkeypatch: pytest.MonkeyPatch) -> None:
    no_esp(monkeypatch)
    from tunbench.doctor import checks

    (check,) = [c for c in checks() if c.name == "tunnel strongswan"]
    assert not check.ok and "datapath=libipsec" in check.detail and "(modprobe esp4)" in check.fix
    out = CliRunner().invoke(app, ["tunnels"], env={"COLUMNS": "300"}).output
    (row,) = [line for line in out.splitlines() if line.startswith("│ strongswan ")]
    assert "kernel module missing" in row and "ready" not in row  # the table may wrap the rest
    res = CliRunner().invoke(app, ["run", "-t", "strongswan", "--dry-run"], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert "strongswan needs kernel module esp4 (or run it with datapath=libipsec" in res.output
    res = CliRunner().invoke(app, ["run", "-t", "strongswan[datapath=libipsec]", "--dry-run"], env={"COLUMNS": "300"})
    assert "esp4" not in res.output
