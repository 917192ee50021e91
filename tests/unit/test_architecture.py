"""The import-graph rules of docs/architecture.md that import-linter's layers contract (pyproject.toml,
`make lint`) cannot say: no import cycle anywhere in the package, and only host/ runs programs or enters
namespaces (subprocess, pyroute2's netns and process calls)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import grimp
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

SRC = Path(__file__).resolve().parents[2] / "src" / "tunbench"
# what only host/ may use: running programs, and pyroute2's namespace and process calls
FORBIDDEN_MODULES = {"subprocess", "pyroute2.netns", "pyroute2.nslink", "pyroute2.nsexec"}
FORBIDDEN_NAMES = {("pyroute2", "netns"), ("pyroute2", "NetNS"), ("pyroute2", "NSPopen")}


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (scipy's csgraph)."""
    modules = sorted(graph.modules)
    at = {m: i for i, m in enumerate(modules)}
    edges = [(at[m], at[n]) for m in modules for n in graph.find_modules_directly_imported_by(m)]
    rows, cols = zip(*edges, strict=True) if edges else ((), ())
    adjacency = csr_matrix((np.ones(len(edges)), (rows, cols)), shape=(len(modules), len(modules)))
    _, label = connected_components(adjacency, directed=True, connection="strong")
    groups: dict[int, list[str]] = {}
    for m, lab in zip(modules, label, strict=True):
        groups.setdefault(int(lab), []).append(m)
    return [g for g in groups.values() if len(g) > 1]


def test_the_cycle_check_sees_a_cycle() -> None:
    g = grimp.ImportGraph()
    for a, b in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        g.add_import(importer=a, imported=b)
    assert _cycles(g) == [["p.a", "p.b", "p.c"]]


def test_every_module_is_in_the_layers_contract() -> None:
    """A top-level module left out of the layers (pyproject.toml) would escape the layer rules."""
    contract = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    listed = {name.strip("() ") for layer in contract["layers"] for name in re.split(r"[|:]", layer)}
    top = {f"tunbench.{p.stem}" for p in SRC.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert top - {"tunbench.__init__"} <= listed, sorted(top - listed - {"tunbench.__init__"})


def test_no_import_cycles() -> None:
    graph = grimp.build_graph("tunbench", exclude_type_checking_imports=False)
    # a package's __init__ importing its own modules is how a package shows its face: not a cycle
    cycles = [c for c in _cycles(graph) if not _only_package_faces(graph, c)]
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def _only_package_faces(graph: grimp.ImportGraph, comp: list[str]) -> bool:
    members = set(comp)
    for m in comp:
        for child in graph.find_modules_directly_imported_by(m) & members:
            if not child.startswith(m + "."):
                return False
    return True


def _forbidden_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [f"{path.name}:{node.lineno} import {a.name}" for a in node.names if a.name in FORBIDDEN_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in FORBIDDEN_MODULES:
                found.append(f"{path.name}:{node.lineno} from {node.module}")
            found += [
                f"{path.name}:{node.lineno} from {node.module} import {a.name}"
                for a in node.names
                if (node.module, a.name) in FORBIDDEN_NAMES
            ]
    return found


def test_only_host_runs_programs_or_enters_namespaces() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path.relative_to(SRC).parts[0] == "host":
            continue
        offenders += [f"{path.relative_to(SRC.parent)}: {f}" for f in _forbidden_imports(path)]
    assert not offenders, "outside host/: " + "; ".join(offenders)


def test_the_rule_sees_what_it_forbids(tmp_path: Path) -> None:
    """The scan is not vacuous: it finds each forbidden form in a file."""
    f = tmp_path / "bad.py"
    f.write_text("import subprocess\nfrom pyroute2 import netns, IPRoute\nimport pyroute2.netns\n")
    assert len(_forbidden_imports(f)) == 3
    assert (SRC / "host" / "proc.py").exists() and _forbidden_imports(SRC / "host" / "proc.py")


def test_the_runner_does_not_know_where_roles_run() -> None:
    """runner.py orders, retries, stops and stores: where roles run is a site's (sites/), how a trial is
    measured a shape's (trial/). No isinstance dispatch, nothing of a site, a place or a topology."""
    path = SRC / "runner.py"
    tree = ast.parse(path.read_text(), str(path))
    calls = [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    assert "isinstance" not in calls
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    where = ("tunbench.sites", "tunbench.remote", "tunbench.topology", "tunbench.host", "tunbench.link")
    assert not [m for m in imported if m.startswith(where)], imported
    assert len(path.read_text().splitlines()) <= 300
