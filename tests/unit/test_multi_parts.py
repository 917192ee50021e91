"""Multi-client pieces without root: ICMP packets, the [multi] adapter schema, options, the clients axis
of the plan, command rewriting."""

from __future__ import annotations

import socket
import struct

import pytest

from tunbench.config.load import check_workloads
from tunbench.config.schema import Scenario
from tunbench.errors import ConfigError
from tunbench.host.place import ns_command
from tunbench.host.ready import checksum, echo_request, parse_reply
from tunbench.link.profile import find_profile
from tunbench.plan import expand
from tunbench.topology.layout import Layout
from tunbench.tunnels.fleet import client_variables, shared_variables
from tunbench.tunnels.registry import parse_ref
from tunbench.tunnels.template import placeholders, render
from tunbench.workloads.fleet_options import ClientsOptions, StormOptions


def test_echo_request_has_a_valid_checksum() -> None:
    pkt = echo_request(0x1234, 7)
    assert pkt[0] == 8 and struct.unpack("!HH", pkt[4:8]) == (0x1234, 7)
    assert checksum(pkt) == 0  # a correct checksum sums to zero


def test_parse_reply_reads_source_and_identifier() -> None:
    icmp = struct.pack("!BBHHH", 0, 0, 0, 0xBEEF, 1) + b"x"
    ip = bytes([0x45, 0, 0, 29, 0, 0, 0, 0, 64, socket.IPPROTO_ICMP, 0, 0]) + socket.inet_aton("198.19.0.1")
    ip += socket.inet_aton("198.19.0.2")
    assert parse_reply(ip + icmp) == ("198.19.0.1", 0xBEEF)
    request = ip + struct.pack("!BBHHH", 8, 0, 0, 0xBEEF, 1)
    assert parse_reply(request) is None and parse_reply(b"short") is None


def test_ip_commands_skip_netns_exec() -> None:
    assert ns_command(["ip", "addr", "add", "x"], "ns1") == (["ip", "-n", "ns1", "addr", "add", "x"], None)
    assert ns_command(["wg", "set", "x"], "ns1") == (["wg", "set", "x"], "ns1")
    assert ns_command(["ip", "netns", "list"], "ns1") == (["ip", "netns", "list"], "ns1")
    assert ns_command(["ip", "link"], None) == (["ip", "link"], None)


@pytest.mark.parametrize("name", ["wireguard-go", "openvpn-udp", "openvpn-tcp"])
def test_builtin_multi_templates_only_use_known_variables(name: str, tmp_path: object) -> None:
    ref = parse_ref(name)
    multi = ref.adapter.spec.multi
    assert multi is not None
    lay = Layout("tb3fa91c", "t1", 3)
    known = {*shared_variables(lay, tmp_path), *client_variables(lay, 1), *ref.merged_params(), "label"}  # type: ignore[arg-type]
    known |= {k.name for k in ref.adapter.spec.keys} | {k.name for k in multi.client_keys} | {"server_peers"}
    texts = [multi.server_peer, multi.probe_address, *(f.content for f in multi.files)]
    texts += [f.path for f in multi.client_files] + [f.content for f in multi.client_files]
    texts += [k.run for k in multi.client_keys] + [k.stdin or "" for k in multi.client_keys]
    for role in (multi.server, multi.client):
        texts += [role.daemon or "", *role.before, *role.after, *role.env.values()]
    for t in texts:
        assert placeholders(t) <= known, (t, placeholders(t) - known)


def test_every_builtin_still_loads_and_single_client_parts_are_untouched() -> None:
    for name in ("direct", "wireguard-go", "openvpn-udp", "openvpn-tcp", "socat", "ssh-forward", "stunnel"):
        spec = parse_ref(name).adapter.spec
        assert spec.target.address
    assert parse_ref("direct").adapter.spec.multi is None


def test_clients_sweep_is_one_case_per_count_and_skips_tunnels_without_multi() -> None:
    refs = [parse_ref("direct"), parse_ref("wireguard-go"), parse_ref("socat")]
    opts = {
        "clients": ClientsOptions(clients=[5, 20]),
        "storm": StormOptions(clients=[50], variants=["connect", "overload"]),
    }
    cases = expand(refs, [find_profile("lan")], [1], ["up", "down"], ["clients", "storm"], options=opts)
    got = sorted((c.workload, c.tunnel.name, c.clients, c.direction, c.variant) for c in cases)
    assert got == [
        ("clients", "wireguard-go", 5, "down", ""),
        ("clients", "wireguard-go", 5, "up", ""),
        ("clients", "wireguard-go", 20, "down", ""),
        ("clients", "wireguard-go", 20, "up", ""),
        ("storm", "wireguard-go", 50, "-", "connect"),
        ("storm", "wireguard-go", 50, "-", "overload"),
    ]
    assert all(c.flows == 1 for c in cases), "the client count is its own axis, not flows"
    assert next(c.title for c in cases if c.clients == 20).endswith("clients · 20 clients · up")
    assert next(c.title for c in cases if c.variant == "overload").endswith("storm · 50 clients · overload")


def test_sweep_uses_the_validated_table() -> None:
    sc = Scenario.model_validate({"workload": {"kind": ["clients"], "clients": {"clients": [7, 9]}}})
    options = check_workloads(sc, "", "test")
    cases = expand([parse_ref("wireguard-go")], [find_profile("lan")], [1], ["up"], ["clients"], options=options)
    assert sorted(c.clients for c in cases) == [7, 9]
    # without options, the workload's defaults
    default = expand([parse_ref("wireguard-go"), parse_ref("direct")], [find_profile("lan")], [1], ["up"], ["clients"])
    assert sorted(c.clients for c in default) == [5, 20, 50, 100], "direct has no [multi] table: skipped"


def test_options_are_validated() -> None:
    with pytest.raises(ValueError):
        ClientsOptions(clients=[0])
    with pytest.raises(ValueError):
        ClientsOptions(clients=[5, 5])
    with pytest.raises(ValueError):
        StormOptions(variants=["connect", "connect"])
    with pytest.raises(ValueError):
        StormOptions(variants=["explode"])  # type: ignore[list-item]
    sc = Scenario.model_validate({"workload": {"kind": ["storm"], "storm": {"clients": [50], "rate": 3}}})
    with pytest.raises(ConfigError, match="unknown key"):
        check_workloads(sc, "", "test")


def test_server_peer_template_renders_per_client() -> None:
    ref = parse_ref("wireguard-go")
    assert ref.adapter.spec.multi is not None
    v = {"client_public": "PUB", "client_inner": "198.19.0.5"}
    out = render(ref.adapter.spec.multi.server_peer, v)
    assert "PublicKey = PUB" in out and "AllowedIPs = 198.19.0.5/32" in out
