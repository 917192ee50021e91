"""session/preflight.py with several client hosts: a fleet's clients spread over them by weight, each host's
addresses checked for its share before anything starts, and the dry run's text saying where everything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunbench import session
from tunbench.config.load import load_scenario
from tunbench.errors import ConfigError
from tunbench.plan import RunPlan
from tunbench.remote.inventory import load_inventory
from tunbench.sites.registry import of_inventory

HOSTS = {
    "c1": "tunbench_address=10.10.0.1 tunbench_client_addresses=10.10.0.100-10.10.0.139",
    "c2": "tunbench_address=10.10.0.2 tunbench_client_addresses=10.10.0.140-10.10.0.179",
    "c3": "tunbench_address=10.10.0.3 tunbench_client_addresses=10.10.0.180-10.10.0.219",
}


def inventory(tmp_path: Path, hosts: dict[str, str] = HOSTS, server: str = "srv tunbench_address=10.10.0.9") -> Path:
    """An inventory whose client hosts are `hosts` (name -> its variables), one a line from line 2, and then
    the [server] group's `server` (empty: no such group)."""
    lines = ["[client]", *(f"{name} {vars_}" for name, vars_ in hosts.items()), "[server]" if server else "", server]
    path = tmp_path / "lab.ini"
    path.write_text("\n".join(lines) + "\n")
    return path


def plan(tmp_path: Path, hosts: Path, kinds: str = '"clients"', counts: str = "[5, 100]") -> RunPlan:
    sc = tmp_path / "s.toml"
    sc.write_text(
        '[run]\ntunnels = ["wireguard-go"]\ndirect = false\n[workload]\n'
        f'kind = [{kinds}]\ndirections = ["up"]\n[workload.clients]\nclients = {counts}\nprotocols = ["udp"]\n'
    )
    scenario, text, source = load_scenario(sc)
    return session.prepare(scenario, source, dry_run=True, text=text, site=of_inventory(load_inventory(hosts)))


def refusal(tmp_path: Path, hosts: Path, **kw: str) -> ConfigError:
    with pytest.raises(ConfigError) as exc:
        plan(tmp_path, hosts, **kw)
    return exc.value


def test_three_client_hosts_with_enough_addresses_pass(tmp_path: Path) -> None:
    p = plan(tmp_path, inventory(tmp_path))
    assert {c.clients for c in p.cases} == {5, 100}
    lines = session.describe(p)
    assert "hosts: server srv; 3 client hosts: c1, c2, c3" in lines  # no weights shown when all are 1
    assert not any("between the first client host" in ln for ln in lines)  # no pair workload in this run


def test_a_client_host_short_of_its_share_is_named_with_its_line_share_and_weight(tmp_path: Path) -> None:
    weighted = dict(HOSTS, c2=HOSTS["c2"] + " tunbench_client_weight=2")  # c2's share of 100: 50 > its 40
    e = refusal(tmp_path, inventory(tmp_path, weighted))
    assert (e.source, e.key) == (f"{tmp_path / 'lab.ini'}:3", "tunbench_client_addresses")
    assert "c2's share is 50 (weight 2 of 4)" in str(e) and "has 40" in str(e) and "100 clients" in str(e)
    unset = dict(HOSTS, c3="tunbench_address=10.10.0.3")
    e = refusal(tmp_path, inventory(tmp_path, unset))
    assert e.source.endswith(":4") and "c3's share is 33 (weight 1 of 3)" in str(e) and "is not set" in str(e)


def test_every_client_count_is_checked_not_only_the_largest(tmp_path: Path) -> None:
    """Weights 6, 6, 2 give c3 two of 10 clients but one of 11 (the Alabama paradox): a pool of one address
    passes the largest case and fails the smaller, so the smaller must be checked too."""
    hosts = {
        "c1": "tunbench_address=10.10.0.1 tunbench_client_weight=6 tunbench_client_addresses=10.10.0.100-10.10.0.109",
        "c2": "tunbench_address=10.10.0.2 tunbench_client_weight=6 tunbench_client_addresses=10.10.0.110-10.10.0.119",
        "c3": "tunbench_address=10.10.0.3 tunbench_client_weight=2 tunbench_client_addresses=10.10.0.120/31",
    }
    assert plan(tmp_path, inventory(tmp_path, hosts), counts="[11]")
    e = refusal(tmp_path, inventory(tmp_path, dict(hosts, c3=hosts["c3"].replace("/31", "/32"))), counts="[10, 11]")
    assert "the clients workload's 10 clients" in str(e) and "c3's share is 2 (weight 2 of 14)" in str(e), str(e)


def test_a_pool_address_that_is_a_run_hosts_own_is_refused(tmp_path: Path) -> None:
    own = dict(HOSTS, c2="tunbench_address=10.10.0.150 tunbench_client_addresses=10.10.0.140-10.10.0.179")
    e = refusal(tmp_path, inventory(tmp_path, own))
    assert e.source.endswith(":3") and "holds 10.10.0.150, c2's own underlay address" in str(e)
    other = dict(HOSTS, c3="tunbench_address=10.10.0.3 tunbench_client_addresses=10.10.0.1-10.10.0.40")
    e = refusal(tmp_path, inventory(tmp_path, other))  # another client host's address
    assert e.source.endswith(":4") and "holds 10.10.0.1, c1's own underlay address" in str(e)
    e = refusal(tmp_path, inventory(tmp_path, server="srv tunbench_address=10.10.0.200"))
    assert "holds 10.10.0.200, the server srv's underlay address" in str(e)
    egress = dict(HOSTS, c1=HOSTS["c1"] + " tunbench_egress_address=10.10.0.185")
    e = refusal(tmp_path, inventory(tmp_path, egress))
    assert e.source.endswith(":4") and "holds 10.10.0.185, c1's egress address (tunbench_egress_address)" in str(e)


def test_two_client_hosts_pools_must_not_overlap(tmp_path: Path) -> None:
    shared = dict(HOSTS, c3="tunbench_address=10.10.0.3 tunbench_client_addresses=10.10.0.170-10.10.0.209")
    e = refusal(tmp_path, inventory(tmp_path, shared))
    assert (e.source, e.key) == (f"{tmp_path / 'lab.ini'}:4", "tunbench_client_addresses")
    assert f"c3's addresses overlap c2's ({tmp_path / 'lab.ini'}:3) at 10.10.0.170-10.10.0.179" in str(e)


def test_every_client_host_with_a_share_needs_an_underlay_address(tmp_path: Path) -> None:
    bare = dict(HOSTS, c2="tunbench_client_addresses=10.10.0.140-10.10.0.179")
    e = refusal(tmp_path, inventory(tmp_path, bare))
    assert (e.source, e.key) == (f"{tmp_path / 'lab.ini'}:3", "tunbench_address")
    assert "host c2 takes up to 33 of the clients workload's clients and has no IPv4 underlay address" in str(e)
    # a host the spread gives no client needs neither an address nor a pool
    light = dict(HOSTS, c2="tunbench_client_weight=0.001")
    assert plan(tmp_path, inventory(tmp_path, light), counts="[5]")


def test_a_client_host_that_is_also_the_server_is_refused_for_a_fleet(tmp_path: Path) -> None:
    both = dict(HOSTS, c2=HOSTS["c2"] + " tunbench_roles=client,server")
    e = refusal(tmp_path, inventory(tmp_path, both, server=""))
    assert e.key == "tunbench_roles" and e.source.endswith(":3")
    assert "host c2 is both the server host and one of 3 client hosts" in str(e)
    # a pair workload runs between the first client host and the server: c2 being both is no matter there
    assert plan(tmp_path, inventory(tmp_path, both, server=""), kinds='"iperf3"')


def test_the_dry_run_shows_the_spread_per_case_and_where_pair_workloads_run(tmp_path: Path) -> None:
    weighted = dict(HOSTS, c1=HOSTS["c1"] + " tunbench_client_weight=2")
    lines = session.describe(
        plan(tmp_path, inventory(tmp_path, weighted), kinds='"clients", "latency"', counts="[5, 60]")
    )
    text = "\n".join(lines)
    assert "hosts: server srv; 3 client hosts: c1 (weight 2), c2 (weight 1), c3 (weight 1)" in lines
    assert "  latency: between the first client host, c1, and the server only" in lines
    case = next(k for k, ln in enumerate(lines) if "60 clients" in ln)
    assert lines[case + 1] == "    clients: c1 30, c2 15, c3 15"
    five = next(k for k, ln in enumerate(lines) if "5 clients" in ln)
    assert lines[five + 1] == "    clients: c1 3, c2 1, c3 1"
    latency = next(k for k, ln in enumerate(lines) if ln.endswith("per trial)") and "latency" in ln)
    assert not lines[latency + 1].startswith("    clients:")
    assert text.count("between the first client host") == 1


def test_one_client_host_is_named_with_the_server_and_spreads_nothing(tmp_path: Path) -> None:
    one = inventory(tmp_path, {"c1": HOSTS["c1"]})
    lines = session.describe(plan(tmp_path, one, kinds='"clients", "latency"', counts="[5, 40]"))
    assert [ln for ln in lines if ln.startswith("hosts:")] == ["hosts: client c1, server srv"], lines
    assert not any(ln.startswith("    clients:") for ln in lines), lines
