"""The one host validator: both inventory readers hand it the same raw host, in its own vocabulary, and it
applies one set of checks with one error style (the file, the line and the key as the file spells it).

A reader's job ends at its syntax and its vocabulary: the Ansible reader merges group variables and reads
`ansible_port`'s text as a number, the `[hosts]` table reader splits `ssh = "user@host"`; each names every
value with the key and line it came from (`Raw`). What a value must be, and what a host gets by default, is
decided here only."""

from __future__ import annotations

import ipaddress
import math
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunbench.errors import ConfigError
from tunbench.remote.inventory.model import DEFAULT_COMMAND, NAME_OK, ROLES, Host

# connection types that still mean "run ssh to the host" (anything else, e.g. `local`, is refused for a host
# that takes a role: tunbench reaches its hosts only through ssh)
SSH_CONNECTIONS = frozenset({"ssh", "smart", "paramiko", "paramiko_ssh"})


@dataclass(frozen=True)
class Raw:
    """One setting as a reader found it, and where: `key` as the file spells it (`ansible_port`,
    `hosts.client.port`), `line` where it was written. `shown` is the value as written, for messages, when
    the reader changed it: the host taken out of `ssh = "root@bench1"`, a port read from INI's text."""

    value: Any
    key: str
    line: int | None
    shown: str | None = None


@dataclass(frozen=True)
class RawHost:
    """A host as either reader describes it, before any check. Text values are `str` (the Ansible reader
    turns numbers into their text and drops empty variables, as Ansible's unset ones); `port` is an int
    where the file gave one."""

    source: str  # the file
    line: int | None  # where the host is defined
    host: Raw  # what `ssh` connects to
    name: Raw | None = None  # the host's name in messages and results (default: host)
    user: Raw | None = None
    port: Raw | None = None
    identity_file: Raw | None = None
    ssh_args: tuple[Raw, ...] = ()  # each a list of strings or one string split like a shell
    address: Raw | None = None
    address6: Raw | None = None
    egress_address: Raw | None = None
    client_addresses: Raw | None = None
    client_weight: Raw | None = None  # a number (the Ansible reader reads its text as one)
    command: Raw | None = None
    roles: frozenset[str] = frozenset()  # the roles its place in the file gives (a group, a table's name)
    named_roles: Raw | None = None  # roles given as a value: a list, or names split at spaces and commas
    connection: Raw | None = None  # how Ansible would connect: only ssh is allowed for a host with a role


def error(source: str, message: str, raw: Raw) -> ConfigError:
    return ConfigError(message, source=source, line=raw.line, key=raw.key)


def text_value(source: str, raw: Raw | None) -> str | None:
    """A text value, stripped; None when not given."""
    if raw is None or raw.value is None:
        return None
    if isinstance(raw.value, bool) or not isinstance(raw.value, str):
        raise error(source, f"expected a string, not {type(raw.value).__name__}", raw)
    value = raw.value.strip()
    if not value:
        raise error(source, "expected a non-empty string", raw)
    return value


def address_range(text: str) -> tuple[str, str]:
    """`198.18.200.100-198.18.200.119` (first and last, inclusive) or a CIDR block `198.18.200.128/27` (its
    addresses but the first and the last, which on a network of that size would be its network and broadcast
    addresses): (first, last). ValueError says what is wrong."""
    if "/" in text:
        net = ipaddress.ip_network(text, strict=False)
        if net.version != 4:
            raise ValueError(f"{text!r} is not an IPv4 block")
        if net.prefixlen >= 31:  # no network or broadcast address to leave out
            return str(net.network_address), str(net.broadcast_address)
        return str(net.network_address + 1), str(net.broadcast_address - 1)
    first_t, dash, last_t = text.partition("-")
    if not dash:
        raise ValueError(f"{text!r}: expected FIRST-LAST (e.g. 192.0.2.100-192.0.2.119) or a CIDR block")
    first, last = ipaddress.ip_address(first_t.strip()), ipaddress.ip_address(last_t.strip())
    if first.version != 4 or last.version != 4:
        raise ValueError(f"{text!r}: IPv4 addresses only")
    if int(last) < int(first):
        raise ValueError(f"{text!r}: the last address is below the first")
    return str(first), str(last)


def _ip(source: str, raw: Raw | None, version: int) -> str | None:
    value = text_value(source, raw)
    if value is None or raw is None:
        return None
    try:
        addr = ipaddress.ip_address(value)
    except ValueError:
        addr = None
    if addr is None or addr.version != version:
        raise error(source, f"expected an IPv{version} address, not {value!r}", raw)
    return str(addr)


def _pool(source: str, raw: Raw | None) -> tuple[str, str] | None:
    value = text_value(source, raw)
    if value is None or raw is None:
        return None
    try:
        return address_range(value)
    except ValueError as e:
        raise error(source, str(e), raw) from None


def _port(source: str, raw: Raw | None) -> int | None:
    if raw is None or raw.value is None:
        return None
    p = raw.value
    if isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= 65535:
        shown = raw.shown if raw.shown is not None else p  # as written: INI's text '0', TOML's 0
        raise error(source, f"bad port {shown!r} (expected 1-65535)", raw)
    return p


def _weight(source: str, raw: Raw | None) -> float:
    """A client host's weight: a positive, finite number (default 1)."""
    if raw is None or raw.value is None:
        return 1.0
    w = raw.value
    if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w <= 0:
        shown = raw.shown if raw.shown is not None else w
        raise error(source, f"bad weight {shown!r} (expected a positive number, e.g. 1 or 2.5)", raw)
    return float(w)


def _ssh_args(source: str, raws: tuple[Raw, ...]) -> list[str]:
    args: list[str] = []
    for raw in raws:
        if isinstance(raw.value, str):
            try:
                args += shlex.split(raw.value)
            except ValueError as e:
                raise error(source, f"cannot split: {e}", raw) from None
        elif isinstance(raw.value, list) and all(isinstance(a, str) for a in raw.value):
            args += raw.value
        else:
            raise error(source, "expected a list of strings (or one string)", raw)
    return args


def _roles(source: str, raw: RawHost) -> frozenset[str]:
    roles = set(raw.roles)
    named = raw.named_roles
    if named is not None and named.value is not None:
        names = named.value if isinstance(named.value, list) else re.split(r"[\s,]+", str(named.value))
        for r in (str(x).strip() for x in names):
            if r and r not in ROLES:
                raise error(source, f"unknown role {r!r} (roles are {', '.join(ROLES)})", named)
            if r:
                roles.add(r)
    return frozenset(roles)


def _with_literal(ssh_host: str, address: str | None, address6: str | None) -> tuple[str | None, str | None]:
    """The underlay addresses, each defaulting to the ssh destination when that is an IP literal of its family."""
    try:
        literal = ipaddress.ip_address(ssh_host)
    except ValueError:
        return address, address6
    if address is None and literal.version == 4:
        address = str(literal)
    if address6 is None and literal.version == 6:
        address6 = str(literal)
    return address, address6


def validate_host(raw: RawHost) -> Host:
    """The Host `raw` describes, or the ConfigError of its first wrong value (file, line, key)."""
    src = raw.source
    # an empty host (`ssh = "root@"`) is a bad destination, not a missing value
    ssh_host = raw.host.value.strip() if isinstance(raw.host.value, str) else text_value(src, raw.host)
    if ssh_host is None or not NAME_OK.match(ssh_host):
        raise error(src, f"bad destination {raw.host.shown or ssh_host!r}", raw.host)
    port = _port(src, raw.port)
    user = text_value(src, raw.user)
    identity = text_value(src, raw.identity_file)
    ssh_args = _ssh_args(src, raw.ssh_args)
    address, address6 = _with_literal(ssh_host, _ip(src, raw.address, 4), _ip(src, raw.address6, 6))
    roles = _roles(src, raw)
    conn = text_value(src, raw.connection)
    if roles and conn and raw.connection and conn not in SSH_CONNECTIONS:
        raise error(src, f"tunbench reaches its hosts only with ssh, not {raw.connection.key}={conn}", raw.connection)
    return Host(
        name=text_value(src, raw.name) or ssh_host,
        ssh_host=ssh_host,
        user=user,
        port=port,
        identity_file=str(Path(identity).expanduser()) if identity else None,
        ssh_args=tuple(ssh_args),
        address=address,
        address6=address6,
        roles=roles,
        command=text_value(src, raw.command) or DEFAULT_COMMAND,
        source=f"{src}:{raw.line}" if raw.line is not None else src,
        egress_address=_ip(src, raw.egress_address, 4),
        client_addresses=_pool(src, raw.client_addresses),
        client_weight=_weight(src, raw.client_weight),
    )
