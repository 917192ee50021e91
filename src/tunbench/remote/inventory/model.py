"""What an inventory describes: the hosts of a multi-host run, and how `ssh` reaches each."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from tunbench.errors import ConfigError

ROLES = ("client", "server", "middle")
DEFAULT_COMMAND = "tunbench"
# what `ssh` may be given as a host, and what an inventory may name one: no spaces or quotes, no leading '-'
NAME_OK = re.compile(r"^[^\s\-'\"\\][^\s'\"\\]*$")


@dataclass(frozen=True)
class Host:
    """One machine tunbench may place roles on, and how `ssh` reaches it."""

    name: str  # inventory name, also what `ssh` is given when no ansible_host
    ssh_host: str  # ansible_host or name
    user: str | None  # ansible_user
    port: int | None  # ansible_port
    identity_file: str | None  # ansible_ssh_private_key_file
    ssh_args: tuple[str, ...]  # shlex-split ansible_ssh_common_args + ansible_ssh_extra_args
    address: str | None  # tunbench_address (else ansible_host if it is an IPv4 literal): the underlay IPv4
    address6: str | None  # tunbench_address6 (else ansible_host if it is an IPv6 literal)
    roles: frozenset[str]  # client, server, middle
    command: str  # tunbench_command: how to start tunbench there (a shell command line)
    source: str  # file:line where the host was first defined
    # tunbench_egress_address: a second, unused IPv4 of the host's network, for an emulated profile between
    # two hosts (the tunnel's client uses it from a namespace behind the emulator: topology/egress.py)
    egress_address: str | None = None
    # tunbench_client_addresses: unused IPv4 addresses of the host's network, one per client of a `clients`
    # trial between two hosts (first and last, inclusive: workloads/fleet_hosts.py gives client i the i-th)
    client_addresses: tuple[str, str] | None = None
    # tunbench_client_weight: this client host's share of a fleet's clients against the other client hosts'
    # (default 1: an even spread; remote/spread.py)
    client_weight: float = 1.0

    def client_pool(self, n: int) -> list[str]:
        """The first `n` addresses of tunbench_client_addresses ([] without it; fewer when it is smaller)."""
        if self.client_addresses is None:
            return []
        first, last = (ipaddress.IPv4Address(a) for a in self.client_addresses)
        return [str(first + k) for k in range(min(n, int(last) - int(first) + 1))]

    def pool_holds(self, address: str) -> bool:
        """Whether tunbench_client_addresses (all of it, not only a fleet's part) holds `address`."""
        if self.client_addresses is None:
            return False
        first, last = (ipaddress.IPv4Address(a) for a in self.client_addresses)
        try:
            return first <= ipaddress.IPv4Address(address) <= last
        except ValueError:  # an IPv6 address
            return False

    def ssh_argv(self, ssh_config: str | None = None) -> list[str]:
        """`ssh` with this host's options, ending with the destination (the caller appends the remote
        command). BatchMode=yes always, and first, so no ssh_args or config can turn prompts back on."""
        argv = ["ssh", "-o", "BatchMode=yes"]
        if ssh_config:
            argv += ["-F", ssh_config]
        if self.port is not None:
            argv += ["-p", str(self.port)]
        if self.identity_file:
            argv += ["-i", self.identity_file]
        if self.user:
            argv += ["-l", self.user]
        return [*argv, *self.ssh_args, self.ssh_host]


def pool_overlap(a: Host, b: Host) -> tuple[str, str] | None:
    """The addresses both hosts' tunbench_client_addresses hold (first, last), or None."""
    if a.client_addresses is None or b.client_addresses is None:
        return None
    lo = max(ipaddress.IPv4Address(a.client_addresses[0]), ipaddress.IPv4Address(b.client_addresses[0]))
    hi = min(ipaddress.IPv4Address(a.client_addresses[1]), ipaddress.IPv4Address(b.client_addresses[1]))
    return (str(lo), str(hi)) if lo <= hi else None


@dataclass(frozen=True)
class Inventory:
    hosts: tuple[Host, ...]
    source: str
    ssh_config: str | None  # tunbench_ssh_config on `all`: passed as `ssh -F`

    def clients(self) -> tuple[Host, ...]:
        """Every host with the client role, in the inventory's order: a fleet (clients, storm) spreads its
        clients over them; a one-client workload runs on the first."""
        return tuple(h for h in self.hosts if "client" in h.roles)

    def for_role(self, role: str) -> Host:
        """The one host that takes `role` (for `client`: the first of the client hosts); a ConfigError naming
        the file if none, or several for another role, do."""
        if role not in ROLES:
            raise ConfigError(f"unknown role {role!r} (roles are {', '.join(ROLES)})", source=self.source)
        found = [h for h in self.hosts if role in h.roles]
        if not found:
            raise ConfigError(
                f"no host takes the role {role!r}: put one in a [{role}] group or give it tunbench_roles={role}",
                source=self.source,
            )
        if len(found) > 1 and role != "client":
            where = ", ".join(f"{h.name} ({h.source})" for h in found)
            raise ConfigError(
                f"the role {role!r} is on {len(found)} hosts: {where}; give it to one", source=self.source
            )
        return found[0]

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise ConfigError(f"no host named {name!r}", source=self.source)
