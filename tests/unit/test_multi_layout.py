"""Multi-client names, addresses and ip-batch scripts (pure)."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import pytest

from tunbench.host.ledger import NAME_RE
from tunbench.topology.hostclients import ClientWires
from tunbench.topology.layout import MAX_CLIENTS, HostsLayout, Layout, client_addr, client_inner, client_mac
from tunbench.tunnels.fleet import client_variables, shared_variables

PREFIX = "tb3fa91c"


def test_addresses_stay_in_the_benchmark_range_and_never_collide() -> None:
    lay = Layout(PREFIX, "t4", MAX_CLIENTS)
    under = [client_addr(i) for i in lay.indices()]
    inner = [client_inner(i) for i in lay.indices()]
    assert len(set(under)) == len(under) == MAX_CLIENTS
    assert lay.server_addr not in under and lay.inner_server not in inner
    bench = ipaddress.ip_network("198.18.0.0/15")
    u16, i16 = ipaddress.ip_network("198.18.0.0/16"), ipaddress.ip_network("198.19.0.0/16")
    for a in [*under, lay.server_addr]:
        assert ipaddress.ip_address(a) in bench and ipaddress.ip_address(a) in u16
    for a in [*inner, lay.inner_server]:
        assert ipaddress.ip_address(a) in i16  # the inner /16 never overlaps the underlay /16
    assert client_addr(1) == "198.18.0.2" and client_addr(254) == "198.18.0.255" and client_addr(255) == "198.18.1.0"
    assert client_inner(1) == "198.19.0.2"


def test_more_clients_than_the_plan_allows_is_refused() -> None:
    with pytest.raises(ValueError):
        Layout(PREFIX, "t1", MAX_CLIENTS + 1)
    with pytest.raises(ValueError):
        Layout(PREFIX, "t1", 0)
    with pytest.raises(ValueError):
        client_addr(70000)


def test_names_carry_the_run_prefix_and_fit_ifnamsiz() -> None:
    lay = Layout(PREFIX, "t12", MAX_CLIENTS)
    names = [lay.bridge, lay.server_if, lay.server_port, lay.server_dev]
    for i in (1, 17, 255, MAX_CLIENTS):
        names += [lay.client_if(i), lay.client_port(i), lay.client_dev(i)]
    for n in names:
        assert len(n) <= 15, n
        assert NAME_RE.match(n), n
    for ns in lay.all_namespaces()[:5]:
        assert NAME_RE.match(ns), ns
    assert lay.client_if(17) == "tb3fa91c-c11"  # hex index
    assert lay.client_ns(17) == "tb3fa91c-t12-c11"
    # every name is unique within its namespace (and tunnel devices across the run: wireguard-go's sockets)
    devs = [lay.client_dev(i) for i in lay.indices()]
    assert len(set(devs)) == len(devs) and lay.server_dev not in devs
    assert len(set(lay.all_namespaces())) == MAX_CLIENTS + 2


def test_macs_are_unique_locally_administered_unicast() -> None:
    macs = [client_mac(i) for i in range(1, MAX_CLIENTS + 1)]
    assert len(set(macs)) == len(macs)
    for m in macs[:3] + macs[-3:]:
        assert re.fullmatch(r"02(:[0-9a-f]{2}){5}", m)
    assert client_mac(0x123456) == "02:74:62:12:34:56"


def test_batch_scripts_build_the_switch_without_touching_the_root_namespace() -> None:
    lay = Layout(PREFIX, "t1", 3)
    srv = lay.server_script()
    veth = f"link add {lay.server_if} address 02:74:63:00:00:01 type veth peer name {lay.server_port}"
    assert f"{veth} netns {lay.bridge_ns}" in srv
    assert f"addr add 198.18.0.1/16 dev {lay.server_if}" in srv
    neigh = [ln for ln in srv if ln.startswith("neigh")]
    assert len(neigh) == 3 and all("nud permanent" in ln for ln in neigh)
    cl = lay.client_script(2)
    assert f"addr add 198.18.0.3/16 dev {lay.client_if(2)}" in cl
    assert any(ln.startswith("link add") and f"netns {lay.bridge_ns}" in ln for ln in cl)
    br = lay.bridge_script()
    assert sum(f"master {lay.bridge}" in ln for ln in br) == 4  # the server's port + 3 clients
    for ln in [*srv, *cl, *br]:
        assert "netns add" not in ln and "dev lo" not in ln


def test_an_emulated_uplink_puts_a_gateway_between_the_switch_and_the_server() -> None:
    lay = Layout(PREFIX, "t2", MAX_CLIENTS, emulated_uplink=True)
    plain = Layout(PREFIX, "t2", 3)
    assert plain.uplink_ns == plain.server_ns and plain.gateway_ns not in plain.all_namespaces()
    assert lay.uplink_ns == lay.gateway_ns == f"{PREFIX}-t2-gw"
    assert lay.all_namespaces()[:3] == [lay.bridge_ns, lay.gateway_ns, lay.server_ns]
    # the server namespace has no veth of its own: its only link is the emulator's TUN device
    assert lay.server_script() == ["link set lo up"]
    gateway = lay.gateway_script()
    assert any(f"peer name {lay.server_port} netns {lay.bridge_ns}" in line for line in gateway)
    gw_addr = next(line.split()[2] for line in gateway if line.startswith("addr add"))
    assert gw_addr == "198.18.255.254/16"
    assert ipaddress.ip_address(client_addr(MAX_CLIENTS)) < ipaddress.ip_address("198.18.255.254")
    assert sum("nud permanent" in line for line in gateway) == MAX_CLIENTS  # the clients' neighbours live here now
    # the server keeps its address; the underlay is routed back through the emulator
    assert lay.uplink_gateway_script()[-1] == f"route add {lay.server_addr}/32 dev {lay.uplink_dev_gateway}"
    server = lay.uplink_server_script()
    assert f"addr add {lay.server_addr}/32 dev {lay.uplink_dev_server}" in server
    assert f"route add 198.18.0.0/16 dev {lay.uplink_dev_server} src {lay.server_addr}" in server
    for name in (lay.uplink_dev_gateway, lay.uplink_dev_server, lay.gateway_ns):
        assert NAME_RE.match(name)


def test_clients_between_hosts_have_the_pools_addresses_and_the_agents_namespaces() -> None:
    pool = tuple(f"192.0.2.{k}" for k in range(100, 120))
    names = tuple(f"tb0a0b0c-t3cc{i:x}" for i in range(1, 21))
    lay = HostsLayout("tb12ab34", "t3", 20, server_addr="192.0.2.2", pool=pool, namespaces=names)
    assert (lay.client_address(1), lay.client_address(20)) == ("192.0.2.100", "192.0.2.119")
    assert lay.client_ns(20) == "tb0a0b0c-t3cc14" and lay.server_ns == ""
    assert lay.all_namespaces() == list(names)
    v = client_variables(lay, 2)
    assert (v["client_addr"], v["client_endpoint"], v["client_inner"]) == ("192.0.2.101", "192.0.2.101", "198.19.0.3")
    assert shared_variables(lay, Path("/tmp/x"))["server_addr"] == "192.0.2.2"
    with pytest.raises(ValueError, match="as many addresses"):
        HostsLayout("tb12ab34", "t3", 21, server_addr="192.0.2.2", pool=pool, namespaces=names)
    with pytest.raises(ValueError, match="in the clients' pool"):
        HostsLayout("tb12ab34", "t3", 2, server_addr="192.0.2.100", pool=pool, namespaces=names)


def test_client_wires_are_born_in_the_clients_namespaces_and_route_to_the_server() -> None:
    w = ClientWires("tb12ab34", "eth0", "192.0.2.2")
    assert w.wire(26) == "tb12ab34-v1a"
    assert w.create_script(26, "ns26") == ["link add link eth0 name tb12ab34-v1a netns ns26 type ipvlan mode l2"]
    assert (
        ClientWires("tb12ab34", "eth0", "192.0.2.2", kind="macvlan")
        .create_script(1, "n")[0]
        .endswith("type macvlan mode bridge")
    )
    assert w.client_script(1, "192.0.2.100") == [
        "link set lo up",
        "addr add 192.0.2.100/32 dev tb12ab34-v1",
        "link set tb12ab34-v1 up",
        "route add 192.0.2.2/32 dev tb12ab34-v1",
    ]
    routed = ClientWires("tb12ab34", "eth0", "203.0.113.2", gateway="192.0.2.1")
    assert routed.client_script(1, "192.0.2.100")[-2:] == [
        "route add 192.0.2.1/32 dev tb12ab34-v1",
        "route add 203.0.113.2/32 via 192.0.2.1 dev tb12ab34-v1",
    ]
    assert w.delete_script(3) == ["link del tb12ab34-v3"]
    with pytest.raises(ValueError, match="other than the server's"):
        w.client_script(1, "192.0.2.2")
    with pytest.raises(ValueError, match="IPv4"):
        ClientWires("tb12ab34", "eth0", "2001:db8::2")
