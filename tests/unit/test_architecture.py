"""The import-graph rules of docs/architecture.md that import-linter's layers contract (pyproject.toml,
`make lint`) cannot say: no import cycle anywhere in the package, and only host/ runs programs or enters
namespaces (subprocess, pyroute2's netns and process calls)."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

SRC = Path(__file__).resolve().parents[2] / "src" / "tunbench"
# what only host/ may use: running programs, and pyroute2's namespace and process calls
FORBIDDEN_MODULES = {"subprocess", "pyroute2.netns", "pyroute2.nslink", "pyroute2.nsexec"}
FORBIDDEN_NAMES = {("pyroute2", "netns"), ("pyroute2", "NetNS"), ("pyroute2", "NSPopen")}


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_import_cycles() -> None:
    graph = grimp.build_graph("tunbench", exclude_type_checking_imports=True)
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
