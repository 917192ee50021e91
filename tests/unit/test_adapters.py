"""Adapter files: every built-in validates, parameters override, and broken files fail clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunbench.errors import ConfigError
from tunbench.topology.addresses import AddressPlan
from tunbench.topology.build import TopologySpec
from tunbench.tunnels.adapter import load_adapter
from tunbench.tunnels.registry import builtin_names, parse_ref
from tunbench.tunnels.template import placeholders, render, render_argv
from tunbench.tunnels.tunnel import base_variables

REQUIRED = {"direct", "wireguard-go", "openvpn-udp", "openvpn-tcp", "ssh-forward", "socat", "stunnel"}


def test_all_required_builtins_exist() -> None:
    assert set(builtin_names()) >= REQUIRED


class _Placed:
    prefix = "tb000000"
    addr = AddressPlan()
    spec = TopologySpec()

    def ifname(self, suffix: str) -> str:
        return f"{self.prefix}-{suffix}"

    def place(self, role: str) -> None:
        return None

    def ns_name(self, role: str) -> str:
        return f"{self.prefix}-{role[0]}"


@pytest.mark.parametrize("name", sorted(builtin_names()))
def test_builtin_templates_only_use_known_variables(name: str) -> None:
    ref = parse_ref(name)
    spec = ref.adapter.spec
    known = {
        *base_variables(_Placed(), Path("/tmp/x")),
        "label",
        *spec.params,
        *(k.name for k in spec.keys),
    }
    texts = [spec.target.address, spec.target.port, *(f.content for f in spec.files)]
    for role in (spec.server, spec.client):
        texts += [*role.before, *role.after, *([role.daemon] if role.daemon else []), *role.env.values()]
    for step in spec.keys:
        texts += [step.run, step.stdin or ""]
    hs = spec.handshakes
    texts += [getattr(hs, k) for k in ("run", "path", "send") if hasattr(hs, k)]
    unknown = set().union(*(placeholders(t) for t in texts)) - known
    assert not unknown, f"{name} uses unknown variables {unknown}"


def test_params_and_label() -> None:
    ref = parse_ref("openvpn-udp[cipher=AES-128-GCM,bin=/opt/old/sbin/openvpn,label=old]")
    assert ref.label == "old"
    assert ref.merged_params()["cipher"] == "AES-128-GCM"
    assert ref.merged_params()["bin"] == "/opt/old/sbin/openvpn"
    assert parse_ref("socat[buffer=512]").label == "socat[buffer=512]"
    assert parse_ref("socat").label == "socat"


def test_openvpn_sends_a_keepalive_each_second_on_both_sides_by_default() -> None:
    """Without one, a side that sends little (the server of an upload) leaves the state OpenVPN's TLS state
    machine runs on every wake-up in, and counts half the instructions (docs/work-gate.md, "OpenVPN's two
    modes")."""
    ref = parse_ref("openvpn-udp")
    params = ref.merged_params()
    assert params["ping"] == "1" and params["ping_restart"] == "0"
    for role in (ref.adapter.spec.server, ref.adapter.spec.client):
        assert role.daemon is not None
        argv = render_argv(role.daemon, {k: "x" for k in placeholders(role.daemon)} | params)
        assert argv[argv.index("--ping") + 1] == "1"
    assert parse_ref("openvpn-udp[ping=0]").merged_params()["ping"] == "0"  # OpenVPN's point-to-point default


def test_unknown_param_is_named() -> None:
    with pytest.raises(ConfigError, match="no parameter .cipher.*known: bin, buffer, client_cpu, commit, cpu_period"):
        parse_ref("socat[cipher=x]")


def test_cpu_caps_are_the_references_own() -> None:
    ref = parse_ref("wireguard-go[client_cpu=74%,server_cpu=50]")
    assert ref.cpu_caps == {"client": 74.0, "server": 50.0}
    assert "client_cpu" not in ref.merged_params()  # never an adapter parameter
    assert ref.label == "wireguard-go[client_cpu=74%,server_cpu=50%]"  # not the uncapped tunnel's label
    assert parse_ref("wireguard-go[client_cpu=74%,label=slow]").label == "slow"
    for bad in ("0", "-5%", "abc", "100000%"):
        with pytest.raises(ConfigError, match=f"client_cpu='{bad}'.*share of one core"):
            parse_ref(f"wireguard-go[client_cpu={bad}]")


def test_cpu_period_sets_the_caps_period() -> None:
    ref = parse_ref("wireguard-go[client_cpu=64%,cpu_period=10ms]")
    assert (ref.cpu_caps, ref.cpu_period_us) == ({"client": 64.0}, 10_000)
    assert ref.label == "wireguard-go[client_cpu=64%,cpu_period=10ms]"
    assert parse_ref("wireguard-go[client_cpu=64%]").cpu_period_us == 100_000  # the kernel's default
    assert "cpu_period" not in ref.merged_params()
    with pytest.raises(ConfigError, match="cpu_period=.*add client_cpu= or server_cpu="):
        parse_ref("wireguard-go[cpu_period=10ms]")
    with pytest.raises(ConfigError, match="client_cpu=50% of a 1 ms period.*1 ms minimum"):
        parse_ref("wireguard-go[client_cpu=50%,cpu_period=1ms]")
    for bad in ("0.5ms", "2000", "fast"):
        with pytest.raises(ConfigError, match=f"cpu_period='{bad}'.*1 to 1000 ms"):
            parse_ref(f"wireguard-go[client_cpu=50%,cpu_period={bad}]")


def test_unknown_tunnel() -> None:
    with pytest.raises(ConfigError, match="unknown tunnel 'nope'.*wireguard-go"):
        parse_ref("nope")


def test_malformed_adapter_names_line_and_key(tmp_path: Path) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(
        'name = "bad"\nlayer = "l3"\n\n[target]\naddress = "{server_addr}"\n\n[client]\n'
        'ready = [{ kind = "smoke", ns = "client" }]\n'
    )
    with pytest.raises(ConfigError) as exc:
        load_adapter(p)
    assert exc.value.line == 8 and exc.value.key.startswith("client.ready.0")
    p.write_text('name = "bad"\nlayer = "l5"\n[target]\naddress = "x"\n')
    with pytest.raises(ConfigError) as exc:
        load_adapter(p)
    assert exc.value.line == 2 and exc.value.key == "layer"


def test_render_argv_keeps_values_with_spaces_as_one_argument() -> None:
    argv = render_argv("wg set {dev} private-key {tmp}/k", {"dev": "tb1", "tmp": "/t with space"})
    assert argv == ["wg", "set", "tb1", "private-key", "/t with space/k"]


def test_render_unknown_variable() -> None:
    with pytest.raises(ConfigError, match=r"unknown variable \{nope\}"):
        render("x {nope}", {"a": "1"}, source="f.toml", key="server.daemon")


def test_a_placeholder_word_that_renders_empty_is_left_out() -> None:
    argv = render_argv("openvpn {opt} --verb 3 x{opt}", {"opt": ""})
    assert argv == ["openvpn", "--verb", "3", "x"]
    assert render_argv("openvpn {opt}", {"opt": "--tcp-nodelay"}) == ["openvpn", "--tcp-nodelay"]
