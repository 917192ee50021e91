"""The `[hosts]` table reader: a scenario's hosts, one sub-table per role, to one raw host per role in the
validator's vocabulary (validate.py decides what each value must be, as for an Ansible inventory).

What is the table's own stays here: its keys, the `ssh` destination's syntax (`[user@]host` or
`ssh://[user@]host[:port]`), and two roles' tables naming one host."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tunbench.errors import ConfigError
from tunbench.remote.inventory.model import ROLES, Host, Inventory
from tunbench.remote.inventory.validate import Raw, RawHost, text_value, validate_host
from tunbench.tomlfile import locate

HOST_TABLE_KEYS = frozenset(
    {
        "ssh",
        "name",
        "port",
        "identity_file",
        "ssh_args",
        "address",
        "address6",
        "egress_address",
        "client_addresses",
        "client_weight",
        "command",
    }
)


class _Where:
    """The key and line of a path in the scenario (`hosts.client.port`), for every error of the table."""

    def __init__(self, source: str, text: str, prefix: str) -> None:
        self.source, self.text, self.prefix = source, text, prefix

    def __call__(self, *path: str | int) -> tuple[str, int | None]:
        keys = [self.prefix, *path] if self.prefix else list(path)
        return ".".join(map(str, keys)), locate(self.text, keys) if self.text else None

    def error(self, message: str, *path: str | int) -> ConfigError:
        key, line = self(*path)
        return ConfigError(message, source=self.source, line=line, key=key)


def inventory_from_table(table: Mapping[str, Any], source: str, *, text: str = "", prefix: str = "hosts") -> Inventory:
    """The hosts of a scenario's `[hosts]` table: one sub-table per role, and an optional `ssh_config`:

        [hosts]
        ssh_config = "~/.ssh/lab_config"   # optional: passed as `ssh -F`
        [hosts.client]
        ssh = "root@bench1"                # required: what `ssh` is given, [user@]host or ssh://[user@]host[:port]
        address = "192.0.2.1"              # the underlay IPv4 the tunnel uses (default: ssh's host, if an IPv4 literal)
        [hosts.server]
        ssh = "bench2.lab"
        port = 2222                        # optional: ssh -p
        identity_file = "~/.ssh/lab"       # optional: ssh -i
        ssh_args = ["-o", "ProxyJump=gw"]  # optional: a list, or one string split like a shell
        address = "192.0.2.2"
        address6 = "2001:db8::2"           # optional
        egress_address = "192.0.2.11"      # optional: a second address, for emulated profiles (client host)
        client_addresses = "192.0.2.100-192.0.2.119"   # optional: one per client of a fleet (client host)
        client_weight = 2                  # optional: a client host's share of a fleet against the others' (default 1)
        command = "/opt/tunbench/bin/tunbench"   # optional: how to start tunbench there (default "tunbench")

    A role is `client`, `server` or `middle`. Several client hosts are an array of tables, `[[hosts.client]]`
    once per host (a fleet spreads its clients over them by `client_weight`; a one-client workload runs on the
    first); errors name one as `hosts.client.1.ssh`. Two roles whose tables give the same `ssh` destination are
    one host taking both roles; their other keys must then agree. `name` (default: the destination's host
    part) names the host in messages and results. `text` (the scenario's TOML text) lets errors carry a line.
    """
    where = _Where(source, text, prefix)
    if not isinstance(table, Mapping):
        raise where.error("expected a table of roles (client, server, middle)")
    ssh_config = None
    hosts: dict[str, Host] = {}
    for role, entry in table.items():
        if role == "ssh_config":
            if not isinstance(entry, str) or not entry.strip():
                raise where.error("expected a path", role)
            ssh_config = str(Path(entry).expanduser())
            continue
        if role not in ROLES:
            raise where.error(f"unknown role (roles are {', '.join(ROLES)}; or ssh_config)", role)
        for at, one in _entries(role, entry, where):
            for key in one:
                if key not in HOST_TABLE_KEYS:
                    raise where.error(f"unknown key (known: {', '.join(sorted(HOST_TABLE_KEYS))})", *at, key)
            host = validate_host(_raw_host(at, one, where))
            same = hosts.get(host.ssh_host + "@" + (host.user or ""))
            if same is not None:
                fields = sorted(HOST_TABLE_KEYS - {"ssh"})  # every setting but the destination itself
                if any(getattr(same, f) != getattr(host, f) for f in fields):
                    raise where.error(f"the same host as {'/'.join(sorted(same.roles))}, with different settings", *at)
                host = dataclasses.replace(same, roles=same.roles | host.roles)
            hosts[host.ssh_host + "@" + (host.user or "")] = host
    if not hosts:
        raise where.error("no hosts: give at least [hosts.client] and [hosts.server]")
    names = [h.name for h in hosts.values()]
    if len(set(names)) != len(names):
        raise where.error("two different hosts have the same name; set `name` on one")
    return Inventory(hosts=tuple(hosts.values()), source=source, ssh_config=ssh_config)


def _entries(role: str, entry: Any, where: _Where) -> list[tuple[tuple[str | int, ...], Mapping[str, Any]]]:
    """A role's table, or for `client` an array of tables (several client hosts): each with its path."""
    if role == "client" and isinstance(entry, list) and entry:
        for i, one in enumerate(entry):
            if not isinstance(one, Mapping):
                raise where.error("expected a table with at least `ssh`", role, i)
        return [((role, i), one) for i, one in enumerate(entry)]
    if not isinstance(entry, Mapping):
        several = " (or, for client, an array of them: [[hosts.client]])" if role == "client" else ""
        raise where.error(f"expected a table with at least `ssh`{several}", role)
    return [((role,), entry)]


def _destination(dest: str, at: tuple[str | int, ...], where: _Where) -> tuple[str | None, str, int | None]:
    """(user, host, port) of `[user@]host` or `ssh://[user@]host[:port]`; the host is checked by the validator."""
    if dest.startswith("ssh://"):
        m = re.fullmatch(r"ssh://(?:([^@/]+)@)?(\[[^\]]+\]|[^:/@]+)(?::(\d+))?/?", dest)
        if not m:
            raise where.error(f"bad ssh URI {dest!r}", *at, "ssh")
        return m.group(1), m.group(2).strip("[]"), int(m.group(3)) if m.group(3) else None
    user_part, sign, host = dest.rpartition("@")
    if sign and not user_part:
        raise where.error(f"bad destination {dest!r}", *at, "ssh")
    return (user_part if sign else None), host, None


def _raw_host(at: tuple[str | int, ...], entry: Mapping[str, Any], where: _Where) -> RawHost:
    """One role's table (`at`: its path, the role first) in the validator's vocabulary: each key as it is,
    the destination taken apart."""

    def raw(key: str) -> Raw | None:
        if entry.get(key) is None:
            return None
        name, line = where(*at, key)
        return Raw(entry[key], name, line)

    ssh = raw("ssh")
    if ssh is None:
        raise where.error("required key is missing", *at, "ssh")
    dest = text_value(where.source, ssh) or ""
    user, host, port = _destination(dest, at, where)
    ssh_args = raw("ssh_args")
    return RawHost(
        source=where.source,
        line=where(*at)[1],
        host=Raw(host, ssh.key, ssh.line, shown=dest),
        name=raw("name"),
        user=Raw(user, ssh.key, ssh.line) if user is not None else None,
        port=raw("port") or (Raw(port, ssh.key, ssh.line) if port is not None else None),
        identity_file=raw("identity_file"),
        ssh_args=(ssh_args,) if ssh_args is not None else (),
        address=raw("address"),
        address6=raw("address6"),
        egress_address=raw("egress_address"),
        client_addresses=raw("client_addresses"),
        client_weight=raw("client_weight"),
        command=raw("command"),
        roles=frozenset({str(at[0])}),
    )
