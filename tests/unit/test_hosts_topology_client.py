"""A pair between hosts on a chosen client host (HostsTopology's `client`, the hosts site's bare pair on a
`machine`): the chosen host's underlay address and its agent, and a clear error for a client host that
lacks what the first one has (the run's preflight checks the first only). No agent is asked here."""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tunbench.errors import TrialError
from tunbench.link.profile import Profile
from tunbench.remote.inventory import load_inventory
from tunbench.remote.topology import HostsTopology, role_hosts
from tunbench.sites.base import Spot
from tunbench.sites.hosts import HostsSite
from tunbench.topology.build import TopologySpec

INV = """\
[server]
s1 tunbench_address=10.10.0.1
[client]
c1 tunbench_address=10.10.0.2 tunbench_egress_address=10.10.0.12
c2 tunbench_address=10.10.0.3
c3
"""


class _Hosts:
    """What HostsTopology reads of a HostRun: the hosts by role, every client host and their agents."""

    def __init__(self, path: Path) -> None:
        inv = load_inventory(path)
        self.underlay = "ipv4"
        self.roles = role_hosts(inv)
        self.client_hosts = inv.clients()
        self.conns = {h.name: SimpleNamespace(name=h.name) for h in inv.hosts}

    def conn_of(self, host: Any) -> Any:
        return self.conns[host.name]


@pytest.fixture
def hosts(tmp_path: Path) -> _Hosts:
    path = tmp_path / "lab.ini"
    path.write_text(INV)
    return _Hosts(path)


def test_the_client_role_goes_to_the_chosen_client_host(hosts: _Hosts) -> None:
    first = HostsTopology(hosts, "tbabc123", "t1", TopologySpec())  # type: ignore[arg-type]
    assert (first.addr.client, first.addr.server) == ("10.10.0.2", "10.10.0.1")
    assert first.conn("client").name == "c1" and first.conn("server").name == "s1"
    (_, c2, _) = hosts.client_hosts
    other = HostsTopology(hosts, "tbabc123", "t1", TopologySpec(), client=c2)  # type: ignore[arg-type]
    assert (other.addr.client, other.addr.server) == ("10.10.0.3", "10.10.0.1")
    assert other.conn("client").name == "c2" and not other.shared


def test_a_later_client_host_without_an_address_is_named(hosts: _Hosts) -> None:
    c1, c2, c3 = hosts.client_hosts
    with pytest.raises(TrialError, match="client host c3 has no ipv4 underlay address: set tunbench_address="):
        HostsTopology(hosts, "tbabc123", "t1", TopologySpec(), client=c3)  # type: ignore[arg-type]
    emulated = Profile(name="d20", emulated=True)
    with pytest.raises(TrialError, match="tunbench_egress_address= on host c2"):
        HostsTopology(hosts, "tbabc123", "t1", TopologySpec(), emulated, client=c2)  # type: ignore[arg-type]
    # the first client host is the preflight's to check
    HostsTopology(hosts, "tbabc123", "t1", TopologySpec(), emulated, client=c1)  # type: ignore[arg-type]


def test_the_hosts_site_offers_its_client_hosts_and_no_other(hosts: _Hosts, tmp_path: Path) -> None:
    site = HostsSite(hosts, SimpleNamespace(prefix="tbabc123"))  # type: ignore[arg-type]
    assert site.client_machines() == ("c1", "c2", "c3")
    spot = Spot("t1u1", tmp_path, TopologySpec(), 0)
    with pytest.raises(ValueError, match="'s1' is not a client host of this run"), contextlib.ExitStack() as stack:
        stack.enter_context(site.bare_pair(spot, None, Profile(name="lan", emulated=False), {}, "s1"))  # type: ignore[arg-type]


def test_the_bare_pair_puts_its_client_on_the_machine_asked(
    hosts: _Hosts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The site's bare pair builds its topology on the chosen client host and brings the tunnel up on it."""
    from tunbench.sites import hosts as site_mod

    seen: list[tuple[str, str]] = []

    class Topo(HostsTopology):
        def __enter__(self) -> Topo:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def ns_name(self, role: str) -> str:
            return ""

    @contextlib.contextmanager
    def tunnel(ref: object, topo: HostsTopology, *args: object) -> Any:
        seen.append((topo.hosts_by_role["client"].name, topo.addr.client))
        yield SimpleNamespace(setup_s=0.1)

    monkeypatch.setattr(site_mod, "HostsTopology", Topo)
    monkeypatch.setattr(site_mod, "Tunnel", tunnel)
    site = HostsSite(hosts, SimpleNamespace(prefix="tbabc123"))  # type: ignore[arg-type]
    lan = Profile(name="lan", emulated=False)
    for machine in ("c2", None, "c1"):
        with site.bare_pair(Spot("t1u1", tmp_path, TopologySpec(), 0), None, lan, {}, machine):  # type: ignore[arg-type]
            pass
    assert seen == [("c2", "10.10.0.3"), ("c1", "10.10.0.2"), ("c1", "10.10.0.2")]
