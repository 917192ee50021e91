"""IPv6 underlay and overlay: the scenario keys and --ip, the adapters' `ipv6` table, the variables, and the
plan-time refusal of what an adapter does not declare."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tunbench.config.load import with_overrides
from tunbench.config.schema import Scenario
from tunbench.errors import ConfigError
from tunbench.link.profile import find_profile
from tunbench.plan import expand, skipped
from tunbench.session import prepare
from tunbench.topology.addresses import BENCH_V6, AddressPlan
from tunbench.topology.build import TopologySpec
from tunbench.tunnels.adapter import load_adapter
from tunbench.tunnels.registry import TunnelRef, builtin_names, parse_ref
from tunbench.tunnels.tunnel import base_variables


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


def fam(ref: TunnelRef, underlay: str = "ipv4", overlay: str = "ipv4") -> TunnelRef:
    return dataclasses.replace(ref, underlay=underlay, overlay=overlay)  # type: ignore[arg-type]


def scenario(**topology: object) -> Scenario:
    return with_overrides(Scenario(), {"topology": dict(topology)})


# ---- scenario ------------------------------------------------------------------------------------------


def test_families_default_to_ipv4_and_validate() -> None:
    sc = Scenario()
    assert (sc.topology.underlay, sc.topology.overlay) == ("ipv4", "ipv4")
    assert scenario(underlay="ipv6", overlay="ipv6").topology.overlay == "ipv6"
    with pytest.raises(ConfigError, match="topology.underlay"):
        scenario(underlay="6")
    with pytest.raises(ConfigError, match="needs the link's IPv6 addresses"):
        scenario(underlay="ipv6", ipv6=False)


def test_every_tunnel_of_a_run_gets_the_run_families() -> None:
    plan = prepare(with_overrides(scenario(underlay="ipv6"), {"run": {"tunnels": ["wireguard-go"]}}), "t", dry_run=True)
    assert {(r.underlay, r.overlay) for r in plan.refs} == {("ipv6", "ipv4")}


# ---- the adapter's ipv6 table --------------------------------------------------------------------------

L4 = 'name = "x"\nlayer = "l4"\n[target]\naddress = "127.0.0.1"\n'
L3 = 'name = "x"\nlayer = "l3"\n[params]\nmtu = "1400"\n[target]\naddress = "{inner_server}"\n'


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (L4 + "[ipv6]\noverlay = true\n", "an L4 proxy has no inner network"),
        (L3 + "[ipv6]\nunderlay = true\nunderlay_params = { port = '1' }\n", "'port' is not a parameter"),
        (L3 + "[ipv6]\nunderlay_params = { mtu = '1380' }\n", "without ipv6.underlay = true"),
        (L3 + "[ipv6]\nunderlay = 'yes'\n", "ipv6.underlay"),
        (L3 + "[ipv6]\nboth = true\n", "unknown key"),
    ],
)
def test_bad_ipv6_tables_fail_at_load(tmp_path: Path, body: str, needle: str) -> None:
    p = tmp_path / "a.toml"
    p.write_text(body)
    with pytest.raises(ConfigError, match=needle) as exc:
        load_adapter(p)
    # the error points into the file (found by the fuzz test: a whole-model check named no key or line)
    assert exc.value.key and exc.value.key.startswith("ipv6") and exc.value.line is not None, str(exc.value)


def test_undeclared_means_no_ipv6(tmp_path: Path) -> None:
    p = tmp_path / "a.toml"
    p.write_text(L3)
    spec = load_adapter(p).spec
    assert not spec.ipv6.underlay and not spec.ipv6.overlay


def test_underlay_params_are_the_defaults_over_ipv6_only() -> None:
    ref = parse_ref("vxlan")
    assert ref.merged_params()["mtu"] == "1450"
    assert fam(ref, "ipv6").merged_params()["mtu"] == "1430"
    assert fam(parse_ref("vxlan[mtu=1400]"), "ipv6").merged_params()["mtu"] == "1400"  # the user's value wins


def test_every_builtin_declares_its_ipv6() -> None:
    """Each built-in either works over IPv6 (its integration tests) or says what it cannot do."""
    declared = {
        n: (parse_ref(n).adapter.spec.ipv6.underlay, parse_ref(n).adapter.spec.ipv6.overlay) for n in builtin_names()
    }
    assert declared["direct"] == declared["wireguard-go"] == declared["openvpn-udp"] == (True, True)
    assert declared["socat"] == declared["stunnel"] == declared["ssh-forward"] == (True, False)
    assert declared["ipip"] == (False, False) and declared["gre"] == (False, True)
    assert all(u or o or n in ("ipip", "ipsec-xfrm") for n, (u, o) in declared.items())


# ---- variables -----------------------------------------------------------------------------------------


def test_variables_follow_the_families() -> None:
    v4 = base_variables(_Placed(), Path("/t"))
    assert (v4["server_addr"], v4["server_endpoint"], v4["underlay_ip"]) == ("198.18.0.2", "198.18.0.2", "4")
    assert (v4["inner_server"], v4["inner_prefixlen"], v4["inner_hostlen"]) == ("198.19.0.1", "24", "32")
    v6 = base_variables(_Placed(), Path("/t"), "ipv6", "ipv6")
    assert (v6["server_addr"], v6["server_endpoint"], v6["client_endpoint"]) == (
        "2001:2::2",
        "[2001:2::2]",
        "[2001:2::1]",
    )
    assert (v6["inner_server"], v6["inner_prefixlen"], v6["inner_hostlen"]) == ("2001:2:0:1::1", "64", "128")
    assert (v6["server_addr4"], v6["inner_server4"], v6["underlay"], v6["overlay_ip"]) == (
        "198.18.0.2",
        "198.19.0.1",
        "ipv6",
        "6",
    )
    import ipaddress

    inner = ipaddress.ip_network(f"{v6['inner_server']}/{v6['inner_prefixlen']}", strict=False)
    under = ipaddress.ip_network(f"{v6['server_addr']}/{v6['underlay_prefixlen']}", strict=False)
    assert inner.subnet_of(BENCH_V6) and under.subnet_of(BENCH_V6) and not inner.overlaps(under)  # type: ignore[arg-type]


def test_records_the_families() -> None:
    assert fam(parse_ref("wireguard-go"), "ipv6").families() == {"underlay": "ipv6", "overlay": "ipv4"}
    assert fam(parse_ref("socat"), "ipv6").families() == {"underlay": "ipv6", "overlay": None}


# ---- refusal at plan time ------------------------------------------------------------------------------


def test_undeclared_cases_are_skipped_with_the_reason() -> None:
    lan = [find_profile("lan")]
    refs = [fam(parse_ref(n), "ipv6") for n in ("direct", "wireguard-go", "ipip", "gre")]
    cases = expand(refs, lan, [1], ["up"], ["iperf3"])
    assert {c.tunnel.name for c in cases} == {"direct", "wireguard-go"}
    assert skipped(refs, ["iperf3"]) == [
        ("ipip", "iperf3", "the adapter does not declare an IPv6 underlay (ipv6.underlay in its file)"),
        ("gre", "iperf3", "the adapter does not declare an IPv6 underlay (ipv6.underlay in its file)"),
    ]
    over = [fam(parse_ref(n), overlay="ipv6") for n in ("gre", "ipip", "socat", "ipsec-xfrm")]
    assert {c.tunnel.name for c in expand(over, lan, [1], ["up"], ["iperf3"])} == {"gre"}
    why = {label: reason for label, _, reason in skipped(over, ["iperf3"])}
    assert why["socat"] == "overlay = ipv6 is for L3 tunnels (an L4 proxy has no inner network)"
    assert why["ipip"] == why["ipsec-xfrm"] == "the adapter does not declare an IPv6 overlay (ipv6.overlay in its file)"


def test_many_client_workloads_stay_ipv4() -> None:
    refs = [fam(parse_ref("direct"), "ipv6"), fam(parse_ref("wireguard-go"), "ipv6")]
    assert expand(refs, [find_profile("lan")], [1], ["up"], ["clients"]) == []
    assert skipped(refs, ["clients"]) == [
        ("wireguard-go", "clients", "the many-client workloads run over IPv4 only (underlay and overlay)")
    ]


def test_a_run_of_only_refused_tunnels_is_refused_clearly() -> None:
    sc = with_overrides(scenario(underlay="ipv6"), {"run": {"tunnels": ["ipip"], "direct": False}})
    with pytest.raises(ConfigError, match=r"nothing to run: .*ipip × iperf3: the adapter does not declare an IPv6"):
        prepare(sc, "t", dry_run=True)
