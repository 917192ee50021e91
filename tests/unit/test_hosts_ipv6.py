"""`--ip 6 --hosts`: each host's underlay address of the run's family (a clear error naming the host and
`tunbench_address6` when it has none), the address plan and the variables the tunnels get from it, and the
NIC lookup for provenance with an IPv6 address."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tunbench.errors import ConfigError
from tunbench.remote import facts
from tunbench.remote.inventory import load_inventory
from tunbench.remote.place import RemotePlace
from tunbench.remote.topology import HostAddressPlan, HostsTopology, role_hosts
from tunbench.topology.build import TopologySpec
from tunbench.tunnels.tunnel import base_variables

INV = """\
[client]
bench1 ansible_host=192.0.2.1 tunbench_address=10.10.0.1 tunbench_address6=2001:db8:0:0::1
[server]
bench2 ansible_host=2001:db8::2 tunbench_address=10.10.0.2
"""


def inventory(tmp_path: Path, text: str = INV) -> Path:
    path = tmp_path / "lab.ini"
    path.write_text(text)
    return path


def test_ipv6_needs_each_hosts_ipv6_address_and_the_error_names_host_and_variable(tmp_path: Path) -> None:
    inv = load_inventory(inventory(tmp_path, INV.replace("ansible_host=2001:db8::2", "ansible_host=bench2.lab")))
    assert set(role_hosts(inv)) == {"client", "server"}  # IPv4: both have tunbench_address
    with pytest.raises(ConfigError) as exc:
        role_hosts(inv, "ipv6")
    assert "host bench2 (server) has no IPv6 underlay address" in str(exc.value)
    assert exc.value.key == "tunbench_address6" and exc.value.source == f"{tmp_path / 'lab.ini'}:4"
    # and IPv4 names its own variable
    inv4 = load_inventory(inventory(tmp_path, "[client]\nh1 tunbench_address6=2001:db8::1\n[server]\nh2\n"))
    with pytest.raises(ConfigError) as exc:
        role_hosts(inv4)
    assert "host h1 (client) has no IPv4 underlay address" in str(exc.value) and exc.value.key == "tunbench_address"
    # one host with both roles needs neither: its two namespaces get tunbench's own addresses
    one = load_inventory(inventory(tmp_path, "[client]\nh1\n[server]\nh1\n"))
    assert role_hosts(one, "ipv6")["server"].name == "h1"


class _Hosts:
    def __init__(self, path: Path) -> None:
        self.roles = role_hosts(load_inventory(path), "ipv6")


def test_the_address_plan_takes_the_hosts_ipv6_underlay(tmp_path: Path) -> None:
    topo = HostsTopology(_Hosts(inventory(tmp_path)), "tbabc123", "t1", TopologySpec())  # type: ignore[arg-type]
    assert isinstance(topo.addr, HostAddressPlan)
    assert (topo.addr.client6, topo.addr.server6) == ("2001:db8::1", "2001:db8::2")  # the literal, too
    assert (topo.addr.client, topo.addr.server) == ("10.10.0.1", "10.10.0.2")
    conn = SimpleNamespace(name="bench")  # the places' own namespaces: the hosts' (no agent asked here)
    topo._places = {r: RemotePlace(conn, r, str(tmp_path), None) for r in ("client", "server")}  # type: ignore[arg-type]
    v6 = base_variables(topo, tmp_path, "ipv6")
    assert (v6["client_addr"], v6["server_addr"]) == ("2001:db8::1", "2001:db8::2")
    assert v6["server_endpoint"] == "[2001:db8::2]" and v6["underlay_ip"] == "6"
    v4 = base_variables(topo, tmp_path, "ipv4")
    assert (v4["client_addr"], v4["server_endpoint"]) == ("10.10.0.1", "10.10.0.2")
    # the inner addresses stay tunbench's own
    assert v6["inner_server"] == "198.19.0.1"


def test_provenance_finds_the_nic_of_an_ipv6_address_however_it_is_written() -> None:
    links = [
        {"ifname": "lo", "addr_info": [{"local": "127.0.0.1"}, {"local": "::1"}]},
        {
            "ifname": "eth0",
            "addr_info": [{"local": "198.18.200.1"}, {"local": "2001:2:0:c8::1"}, {"local": "fe80::1%eth0"}],
        },
    ]
    assert facts._holder(links, "2001:2:0:c8:0:0:0:1")["ifname"] == "eth0"  # type: ignore[index]
    assert facts._holder(links, "198.18.200.1")["ifname"] == "eth0"  # type: ignore[index]
    assert facts._holder(links, "2001:2:0:c8::9") is None
    assert facts._holder(links, "not an address") is None
