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
    "rattler": {
        "envtool.lock.solve",
        "envtool.lock.install",
        "envtool.lock.pkgcache",
        "envtool.lock.pixi",
        "envtool.judge.specs",
    },
}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        root = REPO / "probes" if package == "envtool_node" else REPO
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
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


# The packages (and top-level modules) of envtool, each importing only those after it;
# docs/architecture.md states the same order.
ORDER = (
    "cli", "commands", "doctor", "report", "history", "image", "image_channels", "wheel_cache",
    "cluster", "fix", "gather", "environments", "policy", "judge", "protocol", "lock", "joblog",
    "nccl", "pip_entries", "models", "private", "proc", "yamlio", "errors", "envtool_node",
)  # fmt: skip


def _unit(module: str) -> str:
    parts = module.split(".")
    return "envtool_node" if parts[0] == "envtool_node" else (parts[1] if len(parts) > 1 else "")


def test_the_packages_import_in_one_order() -> None:
    """No package-level circle either (doctor <-> report and lock <-> cluster were two)."""
    rank = {unit: i for i, unit in enumerate(ORDER)}
    backwards = sorted(
        f"{a} -> {b}"
        for a, targets in _graph().items()
        for b in targets
        if _unit(a) in rank and _unit(b) in rank and rank[_unit(a)] > rank[_unit(b)]
    )
    assert backwards == []
    units = {_unit(m) for m in _modules()} - {"", "__main__"}
    assert units <= set(ORDER), units - set(ORDER)  # a new package gets its place here
    text = (REPO / "docs" / "architecture.md").read_text()
    assert "`" + " → ".join(ORDER) + "`" in " ".join(text.split()), "architecture.md's order"


def test_every_module_has_its_row_in_the_architecture_page() -> None:
    """docs/architecture.md is a checked index: each module is named in its package's row
    (``name`` in backquotes), each top-level module by its path."""
    rows: dict[str, str] = {}
    for line in (REPO / "docs" / "architecture.md").read_text().splitlines():
        if line.startswith("| `"):  # a folder may have a row in each of the page's tables
            key = line.split("|")[1].strip().strip("`")
            rows[key] = rows.get(key, "") + line
    missing = []
    for module, file in _modules().items():
        parts = module.split(".")
        if file.name in ("__init__.py", "__main__.py"):
            continue
        if parts[0] == "envtool" and len(parts) == 2:
            path = f"envtool/{parts[1]}.py"
            if not any(path in key or f"`{path}`" in row or f"`{parts[1]}.py`" in row
                       for key, row in rows.items()):  # fmt: skip
                missing.append(module)
            continue
        folder = "/".join(parts[:-1]) + "/"
        row = next((r for key, r in rows.items() if key.endswith(folder)), "")
        if f"`{parts[-1]}`" not in row and f"`{parts[-1]}.py`" not in row:
            missing.append(module)
    assert missing == [], missing


def test_test_files_have_unique_names() -> None:
    """pytest imports test files by their base name (no packages under tests/): two files of
    one name in two folders stop the whole run at collection."""
    names = [p.name for p in (REPO / "tests").rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
