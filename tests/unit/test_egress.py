"""The egress namespace's layout (topology/egress.py): names, the ip scripts and the sysctls, pure."""

from __future__ import annotations

import json

import pytest

from tunbench.errors import ConfigError
from tunbench.host.place import completed
from tunbench.remote import egress as egress_mod
from tunbench.topology.egress import DOWN_TABLE, LOCAL_PREF, UP_TABLE, EgressLayout
from tunbench.topology.sysctl import check


def layout(**kw: object) -> EgressLayout:
    args: dict[str, object] = {
        "prefix": "tb12ab34",
        "netns": "tb99ff00-t3c",
        "nic": "eth0",
        "address": "10.0.0.11",
        "server": "10.0.0.2",
    }
    return EgressLayout(**{**args, **kw})  # type: ignore[arg-type]


def test_every_device_carries_the_run_prefix_and_is_born_in_our_namespace() -> None:
    lay = layout()
    assert (lay.wire, lay.tunnel_side, lay.wire_side) == ("tb12ab34-ev", "tb12ab34-lc", "tb12ab34-le")
    assert lay.create_script() == ["link add link eth0 name tb12ab34-ev netns tb99ff00-t3c type ipvlan mode l2"]
    assert layout(kind="macvlan").create_script()[0].endswith("type macvlan mode bridge")


def test_both_directions_cross_the_emulator_and_nothing_is_translated() -> None:
    script = layout().route_script()
    # up: the tunnel's route to the server enters the emulator; what leaves it goes to the wire
    assert "route add 10.0.0.2/32 dev tb12ab34-lc src 10.0.0.11" in script
    assert f"rule add pref 10 iif tb12ab34-le lookup {UP_TABLE}" in script
    assert f"route add 10.0.0.2/32 dev tb12ab34-ev table {UP_TABLE}" in script
    # down: from the wire, our own address is routed into the emulator, and local delivery comes after
    assert f"rule add pref 20 iif tb12ab34-ev lookup {DOWN_TABLE}" in script
    assert f"route add 10.0.0.11/32 dev tb12ab34-le table {DOWN_TABLE}" in script
    assert script.index(f"rule add pref {LOCAL_PREF} lookup local") < script.index("rule del pref 0")


def test_a_routed_server_goes_through_the_hosts_next_hop() -> None:
    script = layout(server="192.0.2.7", gateway="10.0.0.1").route_script()
    assert f"route add 10.0.0.1/32 dev tb12ab34-ev table {UP_TABLE}" in script
    assert f"route add 192.0.2.7/32 via 10.0.0.1 dev tb12ab34-ev table {UP_TABLE}" in script


def test_arp_is_answered_for_the_egress_address_only() -> None:
    wire = layout().wire_script()
    assert "neigh add proxy 10.0.0.11 dev tb12ab34-ev" in wire  # one proxy entry, at once
    assert "ntable change name arp_cache dev tb12ab34-ev proxy_delay 0" in wire
    assert not any("proxy_arp" in k for k in layout().sysctls())  # never for every address (the server's)
    assert layout().delete_script() == ["link del tb12ab34-ev"]


def test_sysctls_forward_and_accept_our_own_source() -> None:
    s = layout().sysctls()
    assert s["net.ipv4.ip_forward"] == "1"
    assert s["net.ipv4.conf.all.accept_local"] == "1"
    assert s["net.ipv4.conf.all.rp_filter"] == s["net.ipv4.conf.default.rp_filter"] == "0"
    # a packet from the wire for our address must be routed (into the emulator), not demuxed to a socket
    assert s["net.ipv4.tcp_early_demux"] == s["net.ipv4.udp_early_demux"] == "0"
    for key, value in s.items():  # every one passes the namespace sysctl check (no device names)
        check(key, value)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"address": "2001:2::5"}, "IPv4 only"),
        ({"address": "10.0.0.2"}, "is the server's"),
        ({"kind": "vxlan"}, "ipvlan or macvlan"),
        ({"prefix": "tb12ab34-toolong"}, "too long"),
    ],
)
def test_bad_layouts_are_refused(kw: dict[str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        lay = layout(**kw)
        lay.create_script()


ADDRS = [
    {"ifname": "lo", "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8}]},
    {
        "ifname": "eth0",
        "addr_info": [
            {"family": "inet", "local": "10.0.0.1", "prefixlen": 24},
            {"family": "inet6", "local": "2001:db8::1", "prefixlen": 64},
        ],
    },
    {"ifname": "eth1", "addr_info": [{"family": "inet", "local": "192.0.2.9", "prefixlen": 24}]},
]


@pytest.mark.parametrize(
    ("address", "match"),
    [
        ("10.0.0.1", "already on this host's eth0"),  # the host's own: its SSH would go into the emulator
        ("192.0.2.9", "already on this host's eth1"),
        ("10.0.1.11", r"not in a network of eth0.*10\.0\.0\.0/24"),  # replies would never find it
    ],
)
def test_an_egress_address_that_is_taken_or_off_the_nics_network_is_refused(
    address: str, match: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(egress_mod, "run_cmd", lambda *a, **k: completed(["ip"], 0, json.dumps(ADDRS), ""))
    with pytest.raises(ConfigError, match=match):
        egress_mod.check_egress_address(address, "eth0")
    egress_mod.check_egress_address("10.0.0.11", "eth0")  # free, on eth0's network: accepted
