"""The hosts of a multi-host run: an Ansible-style inventory (INI or YAML), or a scenario's `[hosts]` table.

Users reuse the inventory they already have. tunbench reads the parts of it that say how to reach a host
with the system `ssh` (ansible_host, ansible_user, ansible_port, ansible_ssh_private_key_file,
ansible_ssh_common_args, ansible_ssh_extra_args) and its own `tunbench_*` variables; every other variable is
ignored. Variables are merged as Ansible merges them: `all`, then groups from the outermost parent to the
innermost child (groups at the same depth by name), then the host's own variables. The roles a host may take
come from groups named `client`, `server` and `middle` (a host in several is fine: it takes each) and from a
`tunbench_roles` variable. docs/multi-host.md, section "Inventory", is the user's description.

Every error is a ConfigError naming the file, the line (INI; YAML: from the parser's marks) and the key.
"""

from __future__ import annotations

import ast
import dataclasses
import ipaddress
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tunbench.errors import ConfigError
from tunbench.tomlfile import locate

ROLES = ("client", "server", "middle")
DEFAULT_COMMAND = "tunbench"
# tunbench's own variables; another tunbench_* name is a typo and an error
TUNBENCH_VARS = frozenset(
    {
        "tunbench_address",
        "tunbench_address6",
        "tunbench_egress_address",
        "tunbench_client_addresses",
        "tunbench_roles",
        "tunbench_command",
        "tunbench_ssh_config",
    }
)
# connection types that still mean "run ssh to the host" (anything else, e.g. `local`, is refused for a host
# that takes a role: tunbench reaches its hosts only through ssh)
SSH_CONNECTIONS = frozenset({"ssh", "smart", "paramiko", "paramiko_ssh"})
INI_SUFFIXES = frozenset({"", ".ini", ".cfg"})
YAML_SUFFIXES = frozenset({".yml", ".yaml", ".json"})
_RANGE = re.compile(r"\[([0-9]+|[a-zA-Z]):([0-9]+|[a-zA-Z])(?::([0-9]+))?\]")
_NAME_OK = re.compile(r"^[^\s\-'\"\\][^\s'\"\\]*$")


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

    def client_pool(self, n: int) -> list[str]:
        """The first `n` addresses of tunbench_client_addresses ([] without it; fewer when it is smaller)."""
        if self.client_addresses is None:
            return []
        first, last = (ipaddress.IPv4Address(a) for a in self.client_addresses)
        return [str(first + k) for k in range(min(n, int(last) - int(first) + 1))]

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


@dataclass(frozen=True)
class Inventory:
    hosts: tuple[Host, ...]
    source: str
    ssh_config: str | None  # tunbench_ssh_config on `all`: passed as `ssh -F`

    def for_role(self, role: str) -> Host:
        """The one host that takes `role`; a ConfigError naming the file if none or several do."""
        if role not in ROLES:
            raise ConfigError(f"unknown role {role!r} (roles are {', '.join(ROLES)})", source=self.source)
        found = [h for h in self.hosts if role in h.roles]
        if not found:
            raise ConfigError(
                f"no host takes the role {role!r}: put one in a [{role}] group or give it tunbench_roles={role}",
                source=self.source,
            )
        if len(found) > 1:
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


# --- the parsed form both readers produce ---------------------------------------------------------------


@dataclass
class _Var:
    value: Any
    line: int | None


@dataclass
class _Group:
    name: str
    line: int | None
    vars: dict[str, _Var] = field(default_factory=dict)
    children: dict[str, int | None] = field(default_factory=dict)  # child -> line where it was named


@dataclass
class _HostDef:
    name: str
    line: int | None
    vars: dict[str, _Var] = field(default_factory=dict)
    groups: set[str] = field(default_factory=set)


class _Parsed:
    def __init__(self, source: str) -> None:
        self.source = source
        self.groups: dict[str, _Group] = {"all": _Group("all", None)}
        self.hosts: dict[str, _HostDef] = {}

    def group(self, name: str, line: int | None) -> _Group:
        if name not in self.groups:
            self.groups[name] = _Group(name, line)
        return self.groups[name]

    def add_host(self, name: str, group: str, line: int | None, hvars: Mapping[str, _Var]) -> None:
        if not _NAME_OK.match(name):
            raise ConfigError(f"invalid host name {name!r}", source=self.source, line=line, key=name)
        h = self.hosts.get(name)
        if h is None:
            h = self.hosts[name] = _HostDef(name, line)
        h.vars.update(hvars)
        self.group(group, line)
        h.groups.add(group)

    def error(self, message: str, line: int | None = None, key: str = "") -> ConfigError:
        return ConfigError(message, source=self.source, line=line, key=key)


def _expand(pattern: str) -> list[str]:
    """Ansible host ranges: `web[01:03]` -> web01, web02, web03; `db-[a:c]`; `[0:10:5]` (a stride)."""
    m = _RANGE.search(pattern)
    if not m:
        return [pattern]
    head, tail = pattern[: m.start()], pattern[m.end() :]
    lo, hi, stride = m.group(1), m.group(2), int(m.group(3) or 1)
    if stride < 1:
        raise ValueError(f"bad stride in {pattern!r}")
    if lo.isdigit() != hi.isdigit():
        raise ValueError(f"range mixes digits and letters in {pattern!r}")
    if lo.isdigit():
        width = len(lo) if lo.startswith("0") else 0
        items = [str(i).zfill(width) for i in range(int(lo), int(hi) + 1, stride)]
    else:
        items = [chr(c) for c in range(ord(lo), ord(hi) + 1, stride)]
    if not items:
        raise ValueError(f"empty range in {pattern!r}")
    return [head + item + rest for item in items for rest in _expand(tail)]


# --- INI --------------------------------------------------------------------------------------------------


def _ini_value(raw: str) -> Any:
    """A `[group:vars]` value as Ansible reads it: a Python literal when it is one (quotes removed,
    numbers), else the text as written."""
    raw = raw.strip()
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return raw


def _split_host_port(token: str) -> tuple[str, int | None]:
    """`name:2222` and `[2001:db8::1]:2222` as Ansible's INI host lines allow; IPv6 literals are left alone."""
    if m := re.fullmatch(r"\[([^\]]+)\]:(\d+)", token):
        return m.group(1), int(m.group(2))
    if token.count(":") == 1:
        name, _, port = token.partition(":")
        if port.isdigit():
            return name, int(port)
    return token, None


def _parse_ini(text: str, source: str) -> _Parsed:
    p = _Parsed(source)
    section, kind = "ungrouped", "hosts"
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            m = re.fullmatch(r"\[([^\]:\s]+)(?::([^\]\s]+))?\]\s*(?:[#;].*)?", line)
            if not m:
                raise p.error(f"bad section header {line!r}", no)
            section, kind = m.group(1), m.group(2) or "hosts"
            if kind not in ("hosts", "vars", "children"):
                raise p.error(f"unknown section type :{kind} (expected :vars or :children)", no, f"[{section}:{kind}]")
            p.group(section, no)
            continue
        if kind == "vars":
            key, eq, value = line.partition("=")
            if not eq or not key.strip():
                raise p.error("expected key=value", no, f"[{section}:vars]")
            p.groups[section].vars[key.strip()] = _Var(_ini_value(value), no)
            continue
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError as e:
            raise p.error(f"cannot split the line: {e}", no) from None
        if not tokens:
            continue
        if kind == "children":
            if len(tokens) != 1:
                raise p.error("expected one group name per line", no, f"[{section}:children]")
            p.group(tokens[0], no)
            p.groups[section].children.setdefault(tokens[0], no)
            continue
        pattern, port = _split_host_port(tokens[0])
        hvars: dict[str, _Var] = {}
        if port is not None:
            hvars["ansible_port"] = _Var(port, no)
        for tok in tokens[1:]:
            key, eq, value = tok.partition("=")
            if not eq or not key:
                raise p.error(f"expected key=value, not {tok!r}", no, pattern)
            hvars[key] = _Var(value, no)
        try:
            names = _expand(pattern)
        except ValueError as e:
            raise p.error(str(e), no, pattern) from None
        for name in names:
            p.add_host(name, section, no, hvars)
    return p


# --- YAML -------------------------------------------------------------------------------------------------


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _mapping(loader: yaml.SafeLoader, node: yaml.Node | None, p: _Parsed, what: str) -> list[tuple[str, yaml.Node]]:
    """(key, value node) of a YAML mapping (merge keys applied); null is an empty mapping."""
    if node is None or (isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"):
        return []
    if not isinstance(node, yaml.MappingNode):
        raise p.error(f"expected a mapping, not {node.id}", _line(node), what)
    loader.flatten_mapping(node)
    out = []
    for k, v in node.value:
        if not isinstance(k, yaml.ScalarNode):
            raise p.error("expected a plain key", _line(k), what)
        out.append((str(k.value), v))
    return out


def _yaml_group(loader: yaml.SafeLoader, p: _Parsed, name: str, node: yaml.Node, line: int) -> None:
    group = p.group(name, line)
    for key, value in _mapping(loader, node, p, name):
        if key == "hosts":
            for host, hnode in _mapping(loader, value, p, f"{name}.hosts"):
                hvars = {
                    k: _Var(loader.construct_object(v, deep=True), _line(v))
                    for k, v in _mapping(loader, hnode, p, host)
                }
                hline = _line(value) if not isinstance(value, yaml.MappingNode) else _key_line(value, host)
                try:
                    names = _expand(host)
                except ValueError as e:
                    raise p.error(str(e), hline, host) from None
                for n in names:
                    p.add_host(n, name, hline, hvars)
        elif key == "vars":
            for k, v in _mapping(loader, value, p, f"{name}.vars"):
                group.vars[k] = _Var(loader.construct_object(v, deep=True), _line(v))
        elif key == "children":
            for child, cnode in _mapping(loader, value, p, f"{name}.children"):
                cline = _key_line(value, child)
                group.children.setdefault(child, cline)
                _yaml_group(loader, p, child, cnode, cline)
        else:
            raise p.error("unknown key (a group has hosts, vars and children)", _key_line(node, key), f"{name}.{key}")


def _key_line(mapping: yaml.Node, key: str) -> int:
    if isinstance(mapping, yaml.MappingNode):
        for k, _ in mapping.value:
            if isinstance(k, yaml.ScalarNode) and str(k.value) == key:
                return _line(k)
    return _line(mapping)


def _parse_yaml(text: str, source: str) -> _Parsed:
    p = _Parsed(source)
    loader = yaml.SafeLoader(text)
    try:
        try:
            root = loader.get_single_node()
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            raise p.error(
                f"YAML syntax error: {getattr(e, 'problem', None) or e}", mark.line + 1 if mark else None
            ) from None
        for name, node in _mapping(loader, root, p, ""):
            line = _key_line(root, name) if root is not None else 1
            if name != "all":
                p.groups["all"].children.setdefault(name, line)
            _yaml_group(loader, p, name, node, line)
    except yaml.YAMLError as e:  # a value that does not construct (e.g. a bad !!tag)
        mark = getattr(e, "problem_mark", None)
        raise p.error(f"YAML error: {getattr(e, 'problem', None) or e}", mark.line + 1 if mark else None) from None
    finally:
        loader.dispose()
    return p


# --- from the parsed form to Hosts ------------------------------------------------------------------------


def _depths(p: _Parsed) -> dict[str, int]:
    """Each group's depth below `all` (the longest path), as Ansible orders groups for variable merging.
    A group that is its own ancestor is an error."""
    parents: dict[str, set[str]] = {g: set() for g in p.groups}
    for grp in p.groups.values():
        for child in grp.children:
            parents[child].add(grp.name)
    depth: dict[str, int] = {}

    def visit(name: str, path: tuple[str, ...]) -> int:
        if name in path:
            line = p.groups[name].children.get(path[-1])
            raise p.error(f"group cycle: {' -> '.join([*path[path.index(name) :], name])}", line, path[-1])
        if name not in depth:
            ups = parents[name] - {"all"}
            depth[name] = 0 if name == "all" else 1 + max((visit(u, (*path, name)) for u in ups), default=0)
        return depth[name]

    for name in p.groups:
        visit(name, ())
    return depth


def _ancestors(p: _Parsed, direct: Iterable[str]) -> set[str]:
    parents: dict[str, set[str]] = {}
    for grp in p.groups.values():
        for child in grp.children:
            parents.setdefault(child, set()).add(grp.name)
    seen: set[str] = {"all"}
    todo = list(direct)
    while todo:
        g = todo.pop()
        if g not in seen:
            seen.add(g)
            todo.extend(parents.get(g, ()))
    return seen


def _text(p: _Parsed, key: str, var: _Var | None) -> str | None:
    if var is None or var.value is None:
        return None
    if isinstance(var.value, bool) or not isinstance(var.value, str | int | float):
        raise p.error(f"expected a string, not {type(var.value).__name__}", var.line, key)
    text = str(var.value).strip()
    return text or None


def _build(p: _Parsed, base_dir: Path | None) -> Inventory:
    depth = _depths(p)
    for name, g in p.groups.items():
        if name != "all" and "tunbench_ssh_config" in g.vars:
            raise p.error(
                "tunbench_ssh_config applies to every host: set it on `all`",
                g.vars["tunbench_ssh_config"].line,
                "tunbench_ssh_config",
            )
    hosts = []
    for h in p.hosts.values():
        groups = _ancestors(p, h.groups)
        merged: dict[str, _Var] = {}
        for gname in sorted(groups, key=lambda n: (depth[n], n)):
            merged.update(p.groups[gname].vars)
        merged.update(h.vars)
        hosts.append(_host(p, h, groups, merged))
    if not hosts:
        raise p.error("the inventory lists no hosts")
    ssh_config = _text(p, "tunbench_ssh_config", p.groups["all"].vars.get("tunbench_ssh_config"))
    if ssh_config:
        path = Path(ssh_config).expanduser()
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        ssh_config = str(path)
    return Inventory(hosts=tuple(hosts), source=p.source, ssh_config=ssh_config)


def _first(merged: Mapping[str, _Var], *keys: str) -> tuple[str, _Var | None]:
    """The first of `keys` that is set (Ansible's newer name first, then its old aliases)."""
    for k in keys:
        if k in merged:
            return k, merged[k]
    return keys[0], None


def _host(p: _Parsed, h: _HostDef, groups: set[str], merged: dict[str, _Var]) -> Host:
    src = f"{p.source}:{h.line}" if h.line is not None else p.source
    for name, v in merged.items():
        if name.startswith("tunbench_") and name not in TUNBENCH_VARS:
            raise p.error(f"unknown tunbench variable (known: {', '.join(sorted(TUNBENCH_VARS))})", v.line, name)
        if name == "tunbench_ssh_config" and v is not p.groups["all"].vars.get(name):
            raise p.error("tunbench_ssh_config applies to every host: set it on `all`", v.line, name)

    key, var = _first(merged, "ansible_host", "ansible_ssh_host")
    ssh_host = _text(p, key, var) or h.name
    if not _NAME_OK.match(ssh_host):
        raise p.error(f"invalid host {ssh_host!r}", var.line if var else h.line, key)

    key, var = _first(merged, "ansible_port", "ansible_ssh_port")
    port = None
    if var is not None and var.value is not None:
        try:
            port = int(str(var.value).strip())
        except ValueError:
            port = -1
        if isinstance(var.value, bool) or not 1 <= port <= 65535:
            raise p.error(f"bad port {var.value!r} (expected 1-65535)", var.line, key)

    key, var = _first(merged, "ansible_user", "ansible_ssh_user")
    user = _text(p, key, var)
    key, var = _first(merged, "ansible_ssh_private_key_file", "ansible_private_key_file")
    identity = _text(p, key, var)
    if identity:
        identity = str(Path(identity).expanduser())

    ssh_args: list[str] = []
    for key in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        var = merged.get(key)
        text = _text(p, key, var)
        if text and var is not None:
            try:
                ssh_args += shlex.split(text)
            except ValueError as e:
                raise p.error(f"cannot split: {e}", var.line, key) from None

    address, address6 = _with_literal(
        ssh_host,
        _ip(p, merged.get("tunbench_address"), "tunbench_address", 4),
        _ip(p, merged.get("tunbench_address6"), "tunbench_address6", 6),
    )

    roles = {g for g in groups if g in ROLES}
    var = merged.get("tunbench_roles")
    if var is not None and var.value is not None:
        named = var.value if isinstance(var.value, list) else re.split(r"[\s,]+", str(var.value))
        for r in (str(x).strip() for x in named):
            if r and r not in ROLES:
                raise p.error(f"unknown role {r!r} (roles are {', '.join(ROLES)})", var.line, "tunbench_roles")
            if r:
                roles.add(r)

    key, var = _first(merged, "ansible_connection")
    conn = _text(p, key, var)
    if roles and conn and conn not in SSH_CONNECTIONS:
        raise p.error(
            f"tunbench reaches its hosts only with ssh, not ansible_connection={conn}", var.line if var else None, key
        )

    command = _text(p, "tunbench_command", merged.get("tunbench_command")) or DEFAULT_COMMAND
    return Host(
        name=h.name,
        ssh_host=ssh_host,
        user=user,
        port=port,
        identity_file=identity,
        ssh_args=tuple(ssh_args),
        address=address,
        address6=address6,
        roles=frozenset(roles),
        command=command,
        source=src,
        egress_address=_ip(p, merged.get("tunbench_egress_address"), "tunbench_egress_address", 4),
        client_addresses=_pool(p, merged.get("tunbench_client_addresses"), "tunbench_client_addresses"),
    )


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


def _pool(p: _Parsed, var: _Var | None, key: str) -> tuple[str, str] | None:
    text = _text(p, key, var)
    if text is None:
        return None
    try:
        return address_range(text)
    except ValueError as e:
        raise p.error(str(e), var.line if var else None, key) from None


def _ip(p: _Parsed, var: _Var | None, key: str, version: int) -> str | None:
    text = _text(p, key, var)
    if text is None:
        return None
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        addr = None
    if addr is None or addr.version != version:
        raise p.error(f"expected an IPv{version} address, not {text!r}", var.line if var else None, key)
    return str(addr)


# --- entry points -----------------------------------------------------------------------------------------


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


def load_inventory(path: Path) -> Inventory:
    """Read an inventory file: `.ini`, `.cfg` or no suffix as INI; `.yml`, `.yaml`, `.json` as YAML; any
    other suffix as YAML if it reads as a YAML mapping, else as INI."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8 text", source=source) from None
    except OSError as e:
        raise ConfigError(f"cannot read: {e.strerror or e}", source=source) from e
    suffix = path.suffix.lower()
    if suffix in INI_SUFFIXES:
        parsed = _parse_ini(text, source)
    elif suffix in YAML_SUFFIXES:
        parsed = _parse_yaml(text, source)
    else:
        try:
            looks_yaml = isinstance(yaml.safe_load(text), dict)
        except yaml.YAMLError:
            looks_yaml = False
        parsed = _parse_yaml(text, source) if looks_yaml else _parse_ini(text, source)
    return _build(parsed, path.parent)


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
        "command",
    }
)


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
        client_addresses = "192.0.2.100-192.0.2.119"   # optional: one per client of `clients` (client host)
        command = "/opt/tunbench/bin/tunbench"   # optional: how to start tunbench there (default "tunbench")

    A role is `client`, `server` or `middle`. Two roles whose tables give the same `ssh` destination are one
    host taking both roles; their other keys must then agree. `name` (default: the destination's host part)
    names the host in messages and results. `text` (the scenario's TOML text) lets errors carry a line.
    """

    def error(message: str, *path: str) -> ConfigError:
        keys = [prefix, *path] if prefix else list(path)
        line = locate(text, keys) if text else None
        return ConfigError(message, source=source, line=line, key=".".join(keys))

    if not isinstance(table, Mapping):
        raise error("expected a table of roles (client, server, middle)")
    ssh_config = None
    hosts: dict[str, Host] = {}
    for role, entry in table.items():
        if role == "ssh_config":
            if not isinstance(entry, str) or not entry.strip():
                raise error("expected a path", role)
            ssh_config = str(Path(entry).expanduser())
            continue
        if role not in ROLES:
            raise error(f"unknown role (roles are {', '.join(ROLES)}; or ssh_config)", role)
        if not isinstance(entry, Mapping):
            raise error("expected a table with at least `ssh`", role)
        for key in entry:
            if key not in HOST_TABLE_KEYS:
                raise error(f"unknown key (known: {', '.join(sorted(HOST_TABLE_KEYS))})", role, key)
        host = _table_host(role, entry, error, source, text, prefix)
        same = hosts.get(host.ssh_host + "@" + (host.user or ""))
        if same is not None:
            fields = sorted(HOST_TABLE_KEYS - {"ssh"})  # every setting but the destination itself
            if any(getattr(same, f) != getattr(host, f) for f in fields):
                raise error(f"the same host as {'/'.join(sorted(same.roles))}, with different settings", role)
            host = dataclasses.replace(same, roles=same.roles | host.roles)
        hosts[host.ssh_host + "@" + (host.user or "")] = host
    if not hosts:
        raise error("no hosts: give at least [hosts.client] and [hosts.server]")
    names = [h.name for h in hosts.values()]
    if len(set(names)) != len(names):
        raise error("two different hosts have the same name; set `name` on one")
    return Inventory(hosts=tuple(hosts.values()), source=source, ssh_config=ssh_config)


def _table_host(
    role: str, entry: Mapping[str, Any], error: Callable[..., ConfigError], source: str, text: str, prefix: str
) -> Host:
    def string(key: str) -> str | None:
        v = entry.get(key)
        if v is None:
            return None
        if not isinstance(v, str) or not v.strip():
            raise error("expected a non-empty string", role, key)
        return v.strip()

    dest = string("ssh")
    if dest is None:
        raise error("required key is missing", role, "ssh")
    user, port = None, None
    if dest.startswith("ssh://"):
        m = re.fullmatch(r"ssh://(?:([^@/]+)@)?(\[[^\]]+\]|[^:/@]+)(?::(\d+))?/?", dest)
        if not m:
            raise error(f"bad ssh URI {dest!r}", role, "ssh")
        user, host, port = m.group(1), m.group(2).strip("[]"), int(m.group(3)) if m.group(3) else None
    else:
        user_part, at, host = dest.rpartition("@")
        user = user_part if at else None
        if at and not user_part:
            raise error(f"bad destination {dest!r}", role, "ssh")
    if not _NAME_OK.match(host):
        raise error(f"bad destination {dest!r}", role, "ssh")
    if "port" in entry:
        p = entry["port"]
        if isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= 65535:
            raise error(f"bad port {p!r} (expected 1-65535)", role, "port")
        port = p
    raw_args = entry.get("ssh_args", [])
    if isinstance(raw_args, str):
        try:
            args = shlex.split(raw_args)
        except ValueError as e:
            raise error(f"cannot split: {e}", role, "ssh_args") from None
    elif isinstance(raw_args, list) and all(isinstance(a, str) for a in raw_args):
        args = list(raw_args)
    else:
        raise error("expected a list of strings (or one string)", role, "ssh_args")

    def ip(key: str, version: int) -> str | None:
        v = string(key)
        if v is None:
            return None
        try:
            a = ipaddress.ip_address(v)
        except ValueError:
            a = None
        if a is None or a.version != version:
            raise error(f"expected an IPv{version} address, not {v!r}", role, key)
        return str(a)

    def pool() -> tuple[str, str] | None:
        v = string("client_addresses")
        if v is None:
            return None
        try:
            return address_range(v)
        except ValueError as e:
            raise error(str(e), role, "client_addresses") from None

    address, address6 = _with_literal(host, ip("address", 4), ip("address6", 6))
    identity = string("identity_file")
    line = locate(text, [prefix, role] if prefix else [role]) if text else None
    return Host(
        name=string("name") or host,
        ssh_host=host,
        user=user,
        port=port,
        identity_file=str(Path(identity).expanduser()) if identity else None,
        ssh_args=tuple(args),
        address=address,
        address6=address6,
        roles=frozenset({role}),
        command=string("command") or DEFAULT_COMMAND,
        source=f"{source}:{line}" if line else source,
        egress_address=ip("egress_address", 4),
        client_addresses=pool(),
    )
