"""The node package's rules: Python 3.9 syntax, standard library and torch only, no envtool
import; and it really runs under a Python 3.9 interpreter."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, require

from envtool.protocol.documents import read_node

NODE = REPO / "probes" / "envtool_node"
PY39 = Path.home() / ".pyenv" / "versions" / "3.9.18" / "bin" / "python"


@pytest.mark.parametrize("path", sorted(NODE.glob("*.py")), ids=lambda p: p.name)
def test_python39_syntax_and_stdlib_or_torch_only(path: Path) -> None:
    tree = ast.parse(path.read_text(), feature_version=(3, 9))
    for node in ast.walk(tree):
        assert not isinstance(node, ast.Match), f"{path.name}:{node.lineno}: match statement"
        names = []
        if isinstance(node, ast.Import):
            names = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module.split(".")[0]]
        for name in names:
            allowed = name == "torch" or name in sys.stdlib_module_names
            assert allowed, f"{path.name}:{node.lineno}: imports {name}"


def _python39() -> str:
    found = str(PY39) if PY39.is_file() else shutil.which("python3.9")
    require(found is not None, "no Python 3.9 interpreter (pyenv 3.9.18 or python3.9 on PATH)")
    assert found is not None
    return found


def _run(*args: str, cwd: Path = NODE.parent) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_python39(), "-B", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_the_node_document_under_python39(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    out = _run("-m", "envtool_node", "--prefix", str(prefix), "--no-torch")
    assert out.returncode == 0, out.stderr
    doc = read_node(out.stdout, "py39")
    assert doc.problems == () and doc.env is not None and doc.facts is not None
    assert doc.facts.python.startswith("3.9.") and doc.prefix == str(prefix)


def test_every_module_imports_and_the_export_prints_under_python39(tmp_path: Path) -> None:
    modules = [f"envtool_node.{p.stem}" for p in sorted(NODE.glob("*.py")) if p.stem != "__main__"]
    out = _run("-c", f"import {', '.join(modules)}")
    assert out.returncode == 0, out.stderr
    (tmp_path / "conda-meta").mkdir()
    out = _run("-m", "envtool_node.export", "--prefix", str(tmp_path), "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["schema"] == "envtool.export/1" and doc["yaml"].startswith("name: ")


def test_node_numbers_are_ascii_digits_only() -> None:
    """One reader of whole numbers in node text (schema.digits): a field of nvidia-smi, a
    /proc name or a port of ``²`` is Garbage or no number, never int()'s ValueError."""
    from envtool_node import nvsmi, rendezvous, schema

    assert schema.digits("29400") and not schema.digits("²") and not schema.digits("")
    with pytest.raises(nvsmi.Garbage):
        nvsmi._int("²")
    assert rendezvous.port_of("node1:²") == 29400
