"""The metric registry (src/tunbench/metrics/): each metric key is written in exactly one declaration, and
docs/metrics.md shows what the declarations say.

What counts as a metric key here. Every string literal of src/tunbench (docstrings left out) and every
f-string, read as a template (``f"work.{role}.syscalls"`` is ``work.{role}.syscalls``), is cut at ``|`` (a
table column names several keys that way), and each piece is a metric key when it is made of lower-case
letters, digits, ``_``, ``.`` and placeholders, does not end in a file name's extension, and either

* its first dotted segment, written out, is a metric namespace: the first segment of a declared name that
  has a dot (``latency``, ``work``, ``clients``, ``counters``...), a piece ending in ``.`` being a prefix of
  that namespace; or
* it is written as the key of a metrics mapping, whatever its shape: one named ``metrics``
  (``rec.metrics["x"]``, ``metrics.get("x")``, ``.pop``, ``.setdefault``), a name bound to one in the same
  function (``m = rec.metrics``) or typed as one (``m: Metrics``, tunbench.metrics' type, a parameter too), a
  dict written into one (``m.update({...})``, ``m: Metrics = {...}``) or returned as one (by a function that
  returns ``Metrics``); or
* it is a declared name without a dot that holds a ``_`` (``setup_s``, ``throughput_bps``; a plain word such
  as ``interfered`` is also a warning's code or a column's title, so it counts only as a ``metrics`` key).

A template that starts with a placeholder (``f"{p}storm_s"``) is a key under a computed prefix. Written as
the key of a metrics mapping it is read like any other key: it belongs to a declaration when the rest of it
ends some declared name after one of its placeholders (``storm_s`` ends ``clients.{storm}storm_s``), and it is
still a key written outside its declaration (the prefix, too, must come from one: ``STORM_S.key(storm=s)``).
Elsewhere (a file name, a TOML key, a series' name) it is not read, nor is any string written as the key of a
``series`` mapping. Strings that only look like keys of a namespace (cgroup files such as ``cpu.stat``, the
storm's series names) are listed in NOT_METRICS, and NOT_METRICS_IN names the few that are not keys in one
file.

The rules: every metric key must belong to a declaration (a template belongs to one when some values of its
placeholders make it a key of the declaration's family), and none may be written outside a declaration: code
refers to the declaration (``TRIAL_CPU_USER.key(role=role)``, ``THROUGHPUT.name``). PENDING counts, per file,
the keys still written out (the files the registry has not reached yet); it may only shrink.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import re
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from tunbench.metrics import REGISTRY, MetricSpec, Registry
from tunbench.report.metric_table import DECLARING, declared
from tunbench.workloads import fleet_metrics

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "tunbench"
DECLARE_CALLS = re.compile(r"^_?declare(_\w+)?$")
KEY = re.compile(r"[a-z0-9_.{}]+")
FILE_EXTENSIONS = (".json", ".log", ".txt", ".toml", ".db", ".sql", ".out", ".csv", ".svg", ".folded", ".data")
NOT_METRICS = {
    "cpu.stat",
    "cpu.max",
    "cpu.weight",
    "cpu.cfs_period_us",
    "cpu.cfs_quota_us",
    "clients.ready_cdf",
    "clients.ready_s_by_client",
    "clients.ready_per_s",
}
"""Strings of a metric namespace that are not metric keys: cgroup files, and the storm's series names."""
NOT_METRICS_IN = {("remote/agent.py", "setup_s"), ("store/rows.py", "window_s")}
"""Strings that are not metric keys in one file: the agent's answer to `open_clients` names its field after
the figure the controller records from it; the store's row mapping names TrialRecord's `window_s` field (whose
column keeps its first name, duration_s)."""
SAMPLES = ("client", "up", "tcp", "50", "1200", "idle", "send", "min", "x")
"""Values tried for a template's placeholders when matching it to a declaration."""

PENDING: dict[str, int] = {}
"""Metric keys still written outside a declaration, per file (src/tunbench-relative): to be replaced by
references to their declarations. May only shrink."""


def _template(node: ast.JoinedStr) -> str:
    parts = []
    for v in node.values:
        if isinstance(v, ast.Constant):
            parts.append(str(v.value))
        elif isinstance(v, ast.FormattedValue):
            parts.append("{" + ast.unparse(v.value) + "}")
    return "".join(parts)


def _docstrings(tree: ast.Module) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        body = getattr(n, "body", None)
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
        # an attribute's docstring: a string statement right after an assignment
        for a, b in itertools.pairwise(body if isinstance(body, list) else []):
            if (
                isinstance(a, ast.Assign | ast.AnnAssign)
                and isinstance(b, ast.Expr)
                and isinstance(b.value, ast.Constant)
            ):
                out.add(id(b.value))
    return out


def _declarations(tree: ast.Module) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and DECLARE_CALLS.match(n.func.id)
        and n.args
        and isinstance(n.args[0], ast.Constant)
        and isinstance(n.args[0].value, str)
    ]


METRICS_TYPES = {"Metrics", "metrics.Metrics"}
"""How the code types a mapping of metrics it builds (tunbench.metrics.Metrics); a plain ``dict[str, float |
None]`` holds other figures too (a role's CPU summary, a spread's median and max), so it says nothing."""


def _metric_mapping(node: ast.AST, aliases: frozenset[str] = frozenset()) -> bool:
    return (isinstance(node, ast.Name) and (node.id == "metrics" or node.id in aliases)) or (
        isinstance(node, ast.Attribute) and node.attr == "metrics"
    )


def _typed(annotation: ast.expr | None) -> bool:
    return annotation is not None and ast.unparse(annotation) in METRICS_TYPES


def _aliases(scope: ast.AST) -> frozenset[str]:
    """The names a function (or a module) binds to a metrics mapping: from one (``m = rec.metrics``), or typed
    as one (a parameter or an assignment annotated ``Metrics``)."""
    names = set()
    if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
        a = scope.args
        names |= {arg.arg for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs) if _typed(arg.annotation)}
    for n in ast.walk(scope):
        if isinstance(n, ast.Assign) and _metric_mapping(n.value):
            names |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        elif (
            isinstance(n, ast.AnnAssign)
            and isinstance(n.target, ast.Name)
            and (_typed(n.annotation) or (n.value is not None and _metric_mapping(n.value)))
        ):
            names.add(n.target.id)
    return frozenset(names)


def _series(tree: ast.Module) -> set[int]:
    """The string nodes written as the key of a `series` mapping (a series' name, not a metric's)."""
    return {
        id(n.slice)
        for n in ast.walk(tree)
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) and n.value.attr == "series"
    }


def _dict_keys(node: ast.AST | None) -> set[int]:
    return {id(k) for k in node.keys if k is not None} if isinstance(node, ast.Dict) else set()


def _keyed(tree: ast.Module) -> set[int]:
    """The string nodes written as the key of a metrics mapping, in each function and at the module's level."""
    out = set()
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for scope in [tree, *scopes]:
        aliases = _aliases(scope)
        returns_metrics = isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef) and _typed(scope.returns)
        for n in ast.walk(scope):
            if isinstance(n, ast.Subscript) and _metric_mapping(n.value, aliases):
                out.add(id(n.slice))
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args:
                if n.func.attr in ("get", "pop", "setdefault") and _metric_mapping(n.func.value, aliases):
                    out.add(id(n.args[0]))
                elif n.func.attr == "update" and _metric_mapping(n.func.value, aliases):
                    out |= _dict_keys(n.args[0])
            elif (isinstance(n, ast.AnnAssign) and _typed(n.annotation)) or (
                isinstance(n, ast.Return) and returns_metrics
            ):
                out |= _dict_keys(n.value)  # a dict typed as metrics, or returned as them
    return out


def _strings(path: Path) -> list[tuple[int, str, bool]]:
    """(line, text, written as a metrics key) of each string and template of a source file, declarations and
    docstrings left out."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _docstrings(tree) | _series(tree)
    for call in _declarations(tree):
        skip |= {id(a) for a in ast.walk(call)}
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    keyed = _keyed(tree)
    out = []
    for n in ast.walk(tree):
        if id(n) in skip or id(n) in inner:
            continue
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.append((n.lineno, n.value, id(n) in keyed))
        elif isinstance(n, ast.JoinedStr):
            out.append((n.lineno, _template(n), id(n) in keyed))
    return out


def _namespaces() -> set[str]:
    return {s.name.split(".")[0] for s in declared() if "." in s.name}


def _is_key(piece: str, keyed: bool, namespaces: set[str], bare: set[str]) -> bool:
    if not KEY.fullmatch(piece) or piece.endswith(FILE_EXTENSIONS) or piece in NOT_METRICS:
        return False
    if piece.startswith("{"):
        return keyed  # a key under a computed prefix: read where it is written into a metrics mapping
    return keyed or (piece.split(".")[0] in namespaces and "." in piece) or piece in bare


def _tails(specs: list[MetricSpec]) -> list[MetricSpec]:
    """What follows each placeholder of each declared name, as a family of its own (with the declaration's
    choices for the placeholders it keeps): ``clients.{storm}storm_s`` gives ``storm_s``."""
    out = []
    for spec in specs:
        for m in re.finditer(r"\{[a-z_]+\}", spec.name):
            tail = spec.name[m.end() :]
            if tail:
                kept = tuple((k, v) for k, v in spec.choices if f"{{{k}}}" in tail)
                out.append(MetricSpec(tail, spec.unit, spec.better, spec.family, "", choices=kept))
    return out


def _belongs(piece: str, specs: list[MetricSpec]) -> bool:
    """Whether a key, a template or a namespace prefix is one of the declared families'; a key under a computed
    prefix, whether what follows the prefix ends some declared name."""
    if piece.endswith("."):
        return any(s.name.startswith(piece) for s in specs)
    if piece.startswith("{"):
        tail = re.sub(r"^\{[^{}]*\}", "", piece)
        return bool(tail) and any(_belongs_to(tail, t) for t in _tails(specs))
    return _belongs_to(piece, None)


def _belongs_to(piece: str, family: MetricSpec | None) -> bool:
    """Whether a key or a template is a key of `family` (None: of any declaration), trying SAMPLES for the
    template's placeholders."""
    fields = re.findall(r"\{[^{}]*\}", piece)
    for values in itertools.product(SAMPLES, repeat=len(fields)):
        key = piece
        for f, v in zip(fields, values, strict=True):
            key = key.replace(f, v, 1)
        if (REGISTRY.find(key) is not None) if family is None else family.matches(key):
            return True
    return False


def _scan() -> tuple[list[str], Counter[str]]:
    """The undeclared keys (file:line: key), and the count of keys written outside a declaration per file."""
    specs = declared()
    namespaces = _namespaces()
    bare = {s.name for s in specs if "." not in s.name and "_" in s.name}
    undeclared, written = [], Counter[str]()
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for line, text, keyed in _strings(path):
            for piece in text.split("|"):
                if not _is_key(piece, keyed, namespaces, bare) or (rel, piece) in NOT_METRICS_IN:
                    continue
                written[rel] += 1
                if not _belongs(piece, specs):
                    undeclared.append(f"{rel}:{line}: {piece}")
    return undeclared, written


def _classified(path: Path) -> dict[str, str]:
    """Each metric key the scan sees in a file -> "declared" or "undeclared"."""
    specs = declared()
    bare = {s.name for s in specs if "." not in s.name and "_" in s.name}
    out = {}
    for _, text, keyed in _strings(path):
        for piece in text.split("|"):
            if _is_key(piece, keyed, _namespaces(), bare):
                out[piece] = "declared" if _belongs(piece, specs) else "undeclared"
    return out


def test_the_scan_reads_metric_keys_and_nothing_else(tmp_path: Path) -> None:
    src = tmp_path / "sample.py"
    src.write_text(
        '"""A docstring may name latency.p50_ms."""\n'
        'A = "latency.p50_ms"\n'
        'B = f"work.{role}.syscalls.{name}"\n'
        'C = "latency.p50_ms|latency.nowhere_ms"\n'
        'D = rec.metrics["made_up"] or metrics.get("setup_s")\n'
        'E = rec.series["clients.ready_per_s"]\n'
        'F = ("cpu.stat", "iperf3.json", "net.ipv4.ip_forward", "window", "user_s")\n'
        'G = f"{prefix}cpu.{role}.user_s"\n'
        'H = declare("latency.elsewhere_ms", "ms", "lower", "gate", "declared here")\n'
        'I = k.startswith("work.")\n'
        "def j(rec, p, q) -> None:\n"
        "    m = rec.metrics\n"
        '    m[f"{p}storm_s"] = m[f"{q}bogus_s"] = 1.0\n'
        '    m.update({f"{p}ready_p{q}_s": 1.0})\n'
        "def k(p) -> Metrics:\n"
        '    return {f"{p}.jain": 1.0, "not_declared_s": 2.0}\n'
        "def n(p, d: dict[str, float | None]) -> dict[str, float | None]:\n"
        '    d["median"] = 1.0\n'
        '    return {f"{p}storm_s": 1.0, "max": 2.0}\n'
    )
    assert _classified(src) == {
        "latency.p50_ms": "declared",
        "work.{role}.syscalls.{name}": "declared",
        "latency.nowhere_ms": "undeclared",
        "made_up": "undeclared",
        "setup_s": "declared",
        "work.": "declared",
        # keys under a computed prefix, written into a metrics mapping: read; the rest of each must end a name
        "{p}storm_s": "declared",
        "{q}bogus_s": "undeclared",
        "{p}ready_p{q}_s": "declared",
        "{p}.jain": "declared",
        "not_declared_s": "undeclared",
        # a plain dict[str, float | None] is not a metrics mapping: n's strings are not read
    }


def test_every_metric_key_is_declared() -> None:
    undeclared, _ = _scan()
    assert not undeclared, "metric keys no declaration holds (declare them: docs/metrics.md):\n" + "\n".join(undeclared)


def test_no_metric_key_is_written_outside_its_declaration() -> None:
    _, written = _scan()
    assert dict(written) == PENDING, (
        "metric keys written outside a declaration (refer to the declaration instead), per file: "
        f"{dict(sorted(written.items()))}"
    )


def test_every_declaring_module_is_in_the_catalogue() -> None:
    """A declaration in a module that tunbench.report.metric_table does not import would be missing from the
    docs' table, and from any reader of the whole registry."""
    found = set()
    for path in sorted(SRC.rglob("*.py")):
        if _declarations(ast.parse(path.read_text())):
            found.add("tunbench." + ".".join(path.relative_to(SRC).with_suffix("").parts))
    assert found == set(DECLARING)


def test_a_key_finds_its_declaration() -> None:
    declared()
    spec = REGISTRY.find("trial_cpu.client.user_s")
    assert spec is not None and spec.name == "trial_cpu.{role}.user_s"
    assert spec.key(role="server") == "trial_cpu.server.user_s"
    assert spec.values("trial_cpu.server.user_s") == {"role": "server"}
    assert REGISTRY.find("trial_cpu.nobody.user_s") is None
    # the narrowest family wins: link.up.delivered_bytes is its own declaration, not the counters' family
    assert (link := REGISTRY.find("link.up.delivered_bytes")) is not None and link.unit == "bytes"
    with pytest.raises(KeyError):
        spec.key()
    # a device's name may hold a dot (a VLAN); a family with its own few values takes no other
    dev = REGISTRY.find("counters.client.dev.eth0.100.rx_bytes")
    assert dev is not None and dev.name == "counters.{role}.dev.{device}.{field}"
    assert REGISTRY.find("udp.loss") is not None and REGISTRY.find("udp.bogus") is None


def test_the_many_client_keys_have_no_catch_all() -> None:
    """Every `clients.*` key is declared with its own name (workloads/fleet_metrics.py): an unknown figure under
    the fleet's prefixes (the whole, a protocol's phase, a reconnect's first storm, a host) finds no family."""
    declared()
    for key in ("clients.bogus_s", "clients.udp.bogus", "clients.connect.bogus", "clients.host.h1.bogus_s"):
        assert REGISTRY.find(key) is None, key
    ready = REGISTRY.find("clients.host.h2.lab.connect.ready_p50_s")
    assert ready is not None and ready.name == "clients.{on}{storm}ready_p{q}_s"
    assert ready.values("clients.host.h2.lab.connect.ready_p50_s") == {
        "on": "host.h2.lab.",
        "storm": "connect.",
        "q": "50",
    }
    assert fleet_metrics.whole(ready, q=99) == "clients.ready_p99_s"
    assert ready.key(on=fleet_metrics.on("h1"), storm=fleet_metrics.FIRST_STORM, q=90) == (
        "clients.host.h1.connect.ready_p90_s"
    )
    assert fleet_metrics.PHASE_MONITORED.prefix(proto="udp") == "clients.udp."
    with pytest.raises(KeyError):
        fleet_metrics.READY_S.prefix()  # its placeholder does not end the name


def test_a_registry_refuses_a_second_declaration_of_a_name() -> None:
    registry = Registry()
    registry.add(MetricSpec("x.{role}.y_s", "s", "lower", "info", "one"))
    with pytest.raises(ValueError, match="declared twice"):
        registry.add(MetricSpec("x.{role}.y_s", "s", "higher", "info", "another"))
    with pytest.raises(ValueError, match="unknown family"):
        registry.add(MetricSpec("z", "s", "lower", "loud", "no such family"))  # type: ignore[arg-type]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("metric_table_script", ROOT / "scripts" / "metric_table.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["metric_table_script"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_docs_metric_table_is_the_registry() -> None:
    script = _script()
    assert script.held(script.DOC.read_text()) == script.markdown(), "run scripts/metric_table.py render"
