"""What the hosts site (`--hosts`) refuses before anything starts, from the plan's needs and the inventory,
each refusal naming the setting to change; and how it describes where the roles go (which host takes which
role, a fleet's clients per client host)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from tunbench.errors import ConfigError
from tunbench.remote.inventory import Host, Inventory, pool_overlap
from tunbench.remote.spread import Share, spread
from tunbench.remote.topology import role_hosts
from tunbench.sites.needs import SiteNeeds


def hosts_lines(inventory: Inventory, pair_kinds: tuple[str, ...]) -> list[str]:
    """Which hosts take which role: with one client host, the two; with several, their weights too, and that
    the pair workloads (`pair_kinds`) run on the first client host only."""
    clients, server = inventory.clients(), inventory.for_role("server")
    if len(clients) < 2:
        return [f"hosts: client {inventory.for_role('client').name}, server {server.name}"]
    weighted = any(h.client_weight != 1.0 for h in clients)
    names = [h.name + (f" (weight {h.client_weight:g})" if weighted else "") for h in clients]
    lines = [f"hosts: server {server.name}; {len(clients)} client hosts: {', '.join(names)}"]
    if pair_kinds:
        lines.append(
            f"  {', '.join(pair_kinds)}: between the first client host, {clients[0].name}, and the server only"
        )
    return lines


def check_placeable(inventory: Inventory, needs: SiteNeeds) -> None:
    """What a multi-host run cannot do yet is refused before anything starts, naming the setting."""
    emulated = list(needs.emulated)
    two = inventory.for_role("client").name != inventory.for_role("server").name
    if needs.hosts_unplaced:
        placeable = needs.hosts_placeable
        raise ConfigError(
            f"workload {needs.hosts_unplaced[0]!r} is not placed on hosts yet (it brings up its own tunnels, or a "
            f"storm of clients): with --hosts use {', '.join(placeable[:-1])} or {placeable[-1]}",
            source=needs.source,
            key="workload.kind",
        )
    if needs.fleet_kinds:
        check_fleet_placeable(inventory, needs, needs.fleet_kinds[0], emulated)
    if emulated and two and needs.underlay == "ipv6":
        raise ConfigError(
            f"profile(s) {', '.join(emulated)} emulate a link, which between two hosts is IPv4 only for now (the "
            "client host's egress address): run --ip 6 with --profile lan, or the emulated profile over IPv4",
            source=needs.source,
            key="topology.underlay",
        )
    by_role = role_hosts(inventory, needs.underlay)
    client = by_role["client"]
    if emulated and two and not client.egress_address:
        raise ConfigError(
            f"profile(s) {', '.join(emulated)} emulate a link, which between two hosts runs on the client host's "
            f"egress and needs a second, unused address of its network there: set tunbench_egress_address= on "
            f"host {client.name} (docs/multi-host.md), or run --profile lan (the real network between the hosts)",
            source=client.source,
            key="tunbench_egress_address",
        )
    taken = {
        client.address: f"{client.name}'s own",
        by_role["server"].address: f"the server {by_role['server'].name}'s",
    }
    if emulated and two and client.egress_address in taken:
        raise ConfigError(
            f"tunbench_egress_address {client.egress_address} is {taken[client.egress_address]} underlay address: "
            "it must be a second, unused address of the client host's network",
            source=client.source,
            key="tunbench_egress_address",
        )
    if needs.flamegraphs:
        raise ConfigError("--flamegraph profiles local processes: not with --hosts", key="--flamegraph")
    # --count-work on hosts: each role is counted by its host's agent (perf/count_work.py, remote/work.py)
    if needs.capped:
        raise ConfigError(
            f"client_cpu= / server_cpu= cap processes on this machine: not with --hosts ({', '.join(needs.capped)})",
            source=needs.source,
            key="run.tunnels",
        )
    if needs.warm > 1:
        raise ConfigError(
            "warm windows bring a block's tunnels up side by side, which two hosts' root namespaces cannot hold "
            "yet: with --hosts use warm = 1",
            source=needs.source,
            key="run.warm",
        )


def check_cpuset_and_events(needs: SiteNeeds) -> None:
    """CPU placement and a profile's events are this machine's: refused with --hosts, naming the key (a
    profile's events only where the plan's own checks would not refuse them first: with pair workloads)."""
    if needs.cpuset.mode != "off":
        raise ConfigError(
            "CPU placement is applied on this machine only: not with --hosts (pin the hosts' CPUs yourself, or "
            "set cpuset = 'off')",
            source=needs.source,
            key="run.cpuset",
        )
    if needs.timed and not needs.not_pair:
        raise ConfigError(
            f"profile(s) {', '.join(needs.timed)} change over time (events, a trace, faults), which start with "
            "the client/server pair's traffic: with --hosts the emulator runs on a host, where the events are "
            "not started yet nor its faults read; use a profile without events, traces or faults there",
            source=needs.source,
            key="run.profiles",
        )


def fleet_spreads(inventory: Inventory, fleet_sizes: tuple[int, ...]) -> dict[int, list[Share]]:
    """Each client count of the plan's fleet cases (clients, storm), shared among the inventory's client hosts
    by tunbench_client_weight (remote/spread.py), smallest count first."""
    return {n: spread(n, inventory.clients()) for n in sorted(fleet_sizes)}


def _most_per_host(spreads: Mapping[int, list[Share]]) -> dict[str, tuple[int, int]]:
    """Per client host, the most clients any case gives it and that case's client count. Not always the
    largest case's share: largest remainder can give a host fewer of a larger fleet (the Alabama paradox)."""
    most: dict[str, tuple[int, int]] = {}
    for n, shares in spreads.items():
        for sh in shares:
            if sh.count > most.get(sh.host.name, (0, 0))[0]:
                most[sh.host.name] = (sh.count, n)
    return most


def check_fleet_placeable(inventory: Inventory, needs: SiteNeeds, kind: str, emulated: list[str]) -> None:
    """A many-client workload (`kind`) between hosts: its clients on the client hosts (spread by weight), its
    server on another host, IPv4, the real network (no emulated profile), and for each client host an
    underlay address and an address of its network per client of its share (tunbench_client_addresses),
    none of them a run host's own and no two client hosts' the same."""
    clients = inventory.clients()
    server = inventory.for_role("server")
    if clients == (server,):
        raise ConfigError(
            f"the {kind} workload runs between two hosts (its clients on the client host, the server on the "
            "server host); with one host for both roles, run it locally (without --hosts)",
            source=inventory.source,
            key="tunbench_roles",
        )
    if server in clients:
        raise ConfigError(
            f"host {server.name} is both the server host and one of {len(clients)} client hosts: the {kind} "
            "workload between hosts runs its clients on client hosts apart from the server's; take the client "
            f"role from {server.name}",
            source=server.source,
            key="tunbench_roles",
        )
    if needs.underlay == "ipv6":
        raise ConfigError(
            f"the {kind} workload between hosts is IPv4 only: run it without --ip 6",
            source=needs.source,
            key="topology.underlay",
        )
    if emulated:
        raise ConfigError(
            f"profile(s) {', '.join(emulated)} emulate a link, which the {kind} workload between hosts does "
            "not place yet (its clients reach the server over the hosts' own network): use --profile lan",
            source=needs.source,
            key="run.profiles",
        )
    most = _most_per_host(fleet_spreads(inventory, needs.fleet_sizes))
    placed = [h for h in clients if h.name in most]
    for host in placed:
        if not host.address:
            raise ConfigError(
                f"host {host.name} takes up to {most[host.name][0]} of the {kind} workload's clients and has no "
                "IPv4 underlay address: set tunbench_address= (the address the server host reaches it on) or an "
                "IPv4 literal in ansible_host",
                source=host.source,
                key="tunbench_address",
            )
    pools = {h.name: h.client_pool(most[h.name][0]) for h in placed}
    for host in placed:
        share, n = most[host.name]
        if len(pools[host.name]) < share:
            _short_pool(kind, host, clients, share, n, len(pools[host.name]))
    taken: dict[str, str] = {}  # every run host's own addresses, and what each is
    for h in (*clients, server):
        whose = f"the server {h.name}'s" if h is server else f"{h.name}'s own"
        if h.address:
            taken.setdefault(h.address, f"{whose} underlay address")
        if h.egress_address:
            taken.setdefault(h.egress_address, f"{h.name}'s egress address (tunbench_egress_address)")
    for host in placed:
        if clash := next((a for a in pools[host.name] if a in taken), None):
            raise ConfigError(
                f"tunbench_client_addresses holds {clash}, {taken[clash]}: the clients need unused addresses "
                "of the network",
                source=host.source,
                key="tunbench_client_addresses",
            )
    for a, b in itertools.combinations(clients, 2):
        if both := pool_overlap(a, b):
            raise ConfigError(
                f"{b.name}'s addresses overlap {a.name}'s ({a.source}) at {both[0]}-{both[1]}: each client "
                "host's clients need addresses of their own (the hosts may share a network, not addresses)",
                source=b.source,
                key="tunbench_client_addresses",
            )


def _short_pool(kind: str, host: Host, clients: tuple[Host, ...], share: int, n: int, have: int) -> None:
    """Refuse a client host whose tunbench_client_addresses cannot hold its share of `n` clients."""
    has = f"has {have}" if host.client_addresses else "is not set"
    if len(clients) == 1:
        what = f"the {kind} workload brings up to {n} clients; between two hosts each needs"
    else:
        total = sum(h.client_weight for h in clients)
        what = (
            f"the {kind} workload's {n} clients are spread over {len(clients)} client hosts by "
            f"tunbench_client_weight: {host.name}'s share is {share} (weight {host.client_weight:g} of "
            f"{total:g}), and each needs"
        )
    raise ConfigError(
        f"{what} an unused address of {host.name}'s network: its tunbench_client_addresses {has} (e.g. "
        "192.0.2.100-192.0.2.163, docs/multi-host.md)",
        source=host.source,
        key="tunbench_client_addresses",
    )
