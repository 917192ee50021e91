"""The Ansible reader: an inventory file (INI or YAML) to one raw host per host, in the validator's vocabulary.

Users reuse the inventory they already have. tunbench reads the parts of it that say how to reach a host
with the system `ssh` (ansible_host, ansible_user, ansible_port, ansible_ssh_private_key_file,
ansible_ssh_common_args, ansible_ssh_extra_args) and its own `tunbench_*` variables; every other variable is
ignored. Variables are merged as Ansible merges them: `all`, then groups from the outermost parent to the
innermost child (groups at the same depth by name), then the host's own variables. The roles a host may take
come from groups named `client`, `server` and `middle` (a host in several is fine: it takes each) and from a
`tunbench_roles` variable. docs/multi-host.md, section "Inventory", is the user's description.

What is Ansible's stays here: the syntax, the groups and their merging, the variables' names, a variable's
text read as a number or as unset (empty), the `tunbench_*` names that exist. What a value must be is
validate.py's, for this reader and the `[hosts]` table alike. Every error is a ConfigError naming the file,
the line (INI; YAML: from the parser's marks) and the key.
"""

from __future__ import annotations

import ast
import contextlib
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tunbench.errors import ConfigError
from tunbench.remote.inventory.model import NAME_OK, ROLES, Host, Inventory
from tunbench.remote.inventory.validate import Raw, RawHost, text_value, validate_host

# tunbench's own variables; another tunbench_* name is a typo and an error
TUNBENCH_VARS = frozenset(
    {
        "tunbench_address",
        "tunbench_address6",
        "tunbench_egress_address",
        "tunbench_client_addresses",
        "tunbench_client_weight",
        "tunbench_roles",
        "tunbench_command",
        "tunbench_ssh_config",
    }
)
INI_SUFFIXES = frozenset({"", ".ini", ".cfg"})
YAML_SUFFIXES = frozenset({".yml", ".yaml", ".json"})
_RANGE = re.compile(r"\[([0-9]+|[a-zA-Z]):([0-9]+|[a-zA-Z])(?::([0-9]+))?\]")


# --- the parsed form the INI and YAML readers produce -------------------------------------------------


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
        if not NAME_OK.match(name):
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


def _textual(key: str, var: _Var | None) -> Raw | None:
    """A variable as text: Ansible's variables are text, so a number reads as its digits, and an empty one
    (or null) is unset. Anything else (a list, a bool) goes to the validator as it is, to be refused."""
    if var is None or var.value is None:
        return None
    value = var.value
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, str) and not value.strip():
        return None
    return Raw(value, key, var.line)


def _number(key: str, var: _Var | None, kind: type[int] | type[float] = int) -> Raw | None:
    """A port (`kind` int) or a weight (float) as Ansible reads it: a number, or text that is one (INI
    values are text)."""
    if var is None:
        return None
    value = var.value
    if isinstance(value, str):
        with contextlib.suppress(ValueError):  # not a number: the validator refuses it as written
            return Raw(kind(value.strip()), key, var.line, shown=value)
    return Raw(value, key, var.line)


def _first(merged: Mapping[str, _Var], *keys: str) -> tuple[str, _Var | None]:
    """The first of `keys` that is set (Ansible's newer name first, then its old aliases)."""
    for k in keys:
        if k in merged:
            return k, merged[k]
    return keys[0], None


def _raw_host(p: _Parsed, h: _HostDef, groups: set[str], merged: dict[str, _Var]) -> RawHost:
    """The host in the validator's vocabulary, after the checks that are Ansible's own."""
    for name, v in merged.items():
        if name.startswith("tunbench_") and name not in TUNBENCH_VARS:
            raise p.error(f"unknown tunbench variable (known: {', '.join(sorted(TUNBENCH_VARS))})", v.line, name)
        if name == "tunbench_ssh_config" and v is not p.groups["all"].vars.get(name):
            raise p.error("tunbench_ssh_config applies to every host: set it on `all`", v.line, name)
    host_key, host_var = _first(merged, "ansible_host", "ansible_ssh_host")
    roles = merged.get("tunbench_roles")
    return RawHost(
        source=p.source,
        line=h.line,
        host=_textual(host_key, host_var) or Raw(h.name, host_key, host_var.line if host_var else h.line),
        name=Raw(h.name, h.name, h.line),
        user=_textual(*_first(merged, "ansible_user", "ansible_ssh_user")),
        port=_number(*_first(merged, "ansible_port", "ansible_ssh_port")),
        identity_file=_textual(*_first(merged, "ansible_ssh_private_key_file", "ansible_private_key_file")),
        ssh_args=tuple(
            r
            for key in ("ansible_ssh_common_args", "ansible_ssh_extra_args")
            if (r := _textual(key, merged.get(key))) is not None
        ),
        address=_textual("tunbench_address", merged.get("tunbench_address")),
        address6=_textual("tunbench_address6", merged.get("tunbench_address6")),
        egress_address=_textual("tunbench_egress_address", merged.get("tunbench_egress_address")),
        client_addresses=_textual("tunbench_client_addresses", merged.get("tunbench_client_addresses")),
        client_weight=_number("tunbench_client_weight", merged.get("tunbench_client_weight"), float),
        command=_textual("tunbench_command", merged.get("tunbench_command")),
        roles=frozenset(g for g in groups if g in ROLES),
        named_roles=Raw(roles.value, "tunbench_roles", roles.line) if roles is not None else None,
        connection=_textual(*_first(merged, "ansible_connection")),
    )


def _build(p: _Parsed, base_dir: Path | None) -> Inventory:
    depth = _depths(p)
    for name, g in p.groups.items():
        if name != "all" and "tunbench_ssh_config" in g.vars:
            raise p.error(
                "tunbench_ssh_config applies to every host: set it on `all`",
                g.vars["tunbench_ssh_config"].line,
                "tunbench_ssh_config",
            )
    hosts: list[Host] = []
    for h in p.hosts.values():
        groups = _ancestors(p, h.groups)
        merged: dict[str, _Var] = {}
        for gname in sorted(groups, key=lambda n: (depth[n], n)):
            merged.update(p.groups[gname].vars)
        merged.update(h.vars)
        hosts.append(validate_host(_raw_host(p, h, groups, merged)))
    if not hosts:
        raise p.error("the inventory lists no hosts")
    ssh_config = text_value(p.source, _textual("tunbench_ssh_config", p.groups["all"].vars.get("tunbench_ssh_config")))
    if ssh_config:
        path = Path(ssh_config).expanduser()
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        ssh_config = str(path)
    return Inventory(hosts=tuple(hosts), source=p.source, ssh_config=ssh_config)


def load_inventory(path: Path) -> Inventory:
    """Read an inventory file: `.ini`, `.cfg` or no suffix as INI; `.yml`, `.yaml`, `.json` as YAML; any
    other suffix as YAML if it reads as a YAML mapping, else as INI."""
    source = str(path)
    try:
        content = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8 text", source=source) from None
    except OSError as e:
        raise ConfigError(f"cannot read: {e.strerror or e}", source=source) from e
    suffix = path.suffix.lower()
    if suffix in INI_SUFFIXES:
        parsed = _parse_ini(content, source)
    elif suffix in YAML_SUFFIXES:
        parsed = _parse_yaml(content, source)
    else:
        try:
            looks_yaml = isinstance(yaml.safe_load(content), dict)
        except yaml.YAMLError:
            looks_yaml = False
        parsed = _parse_yaml(content, source) if looks_yaml else _parse_ini(content, source)
    return _build(parsed, path.parent)
