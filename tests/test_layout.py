"""The layout docs/architecture.md describes: no import cycle, small files, each heavy
dependency imported in its one place, and the node package apart from envtool."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import REPO

PACKAGES = ("envtool", "envtool_node")
MAX_LINES = 350
ONLY_IN = {  # a heavy dependency and the one module allowed to import it
    "docker": {"envtool.image"},
    "matplotlib": {"envtool.report.plot"},
    "rattler": {"envtool.lock.solve", "envtool.lock.install"},
}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every module of ours ``name`` imports, at top level or inside a function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1],
                                 *([base] if base else [])])  # fmt: skip
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
    return {m for m in out if m in known and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, set(modules)) for name, path in modules.items()}


def test_no_import_cycle() -> None:
    graph, done, stack = _graph(), set(), []

    def visit(node: str) -> None:
        if node in stack:
            cycle = [*stack[stack.index(node) :], node]
            pytest.fail("import cycle: " + " → ".join(cycle))
        if node in done:
            return
        stack.append(node)
        for target in sorted(graph[node]):
            visit(target)
        stack.pop()
        done.add(node)

    for module in sorted(graph):
        visit(module)


def test_the_node_package_imports_nothing_of_envtool() -> None:
    graph = _graph()
    for name, targets in graph.items():
        if name.startswith("envtool_node"):
            assert not [t for t in targets if t.split(".")[0] == "envtool"], name


def test_no_file_over_350_lines() -> None:
    long = {
        str(path.relative_to(REPO)): n
        for path in _modules().values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def _importers(dependency: str) -> set[str]:
    importers = set()
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(n.split(".")[0] == dependency for n in names):
                importers.add(name)
    return importers


@pytest.mark.parametrize("dependency", sorted(ONLY_IN))
def test_heavy_dependencies_have_one_home(dependency: str) -> None:
    assert _importers(dependency) <= ONLY_IN[dependency]


def test_torch_only_on_the_node_side() -> None:
    importers = _importers("torch")
    assert importers and all(m.startswith("envtool_node.") for m in importers), importers
