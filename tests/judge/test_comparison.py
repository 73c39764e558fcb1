"""``envtool diff``'s pure answer: differences apart from the problems inside each input."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from conftest import run_main
from fixtures.lockfiles import HEAD

from envtool import environments
from envtool.cli import main
from envtool.judge import comparison
from envtool.judge.findings import Kind
from envtool.models import Environment, Package

CF = "conda-forge"
PYTORCH = Package("pytorch", "2.1.0", "cuda118_py39h0a6d3b2_300", CF)
NUMPY = Package("numpy", "1.26.4", "py39h474f0d3_0", CF)
PIP_TORCH = Package("torch", "2.1.0", manager="pip")
PIP_NUMPY = Package("numpy", "1.26.4", manager="pip")


def _env(*pkgs: Package, source: str = "A") -> Environment:
    return Environment(source, "lock", pkgs)


def _kinds(findings: tuple[object, ...]) -> list[tuple[str, str]]:
    return [(f.kind.value, f.subject) for f in findings]  # type: ignore[attr-defined]


def test_an_environment_is_identical_to_itself_whatever_it_holds() -> None:
    env = _env(PYTORCH, NUMPY, PIP_TORCH, PIP_NUMPY)
    c = comparison.compare(env, env)
    assert c.identical and c.differences == ()
    # one cause, one finding: pip torch over conda pytorch is two-torches, not also shadowing
    assert _kinds(c.inside_a) == [("two-torches", "torch"), ("pip-shadowing", "numpy")]
    assert c.inside_b == c.inside_a


def test_a_pip_copy_one_side_alone_has_is_a_difference() -> None:
    plain, shadowed = _env(PYTORCH, NUMPY), _env(PYTORCH, NUMPY, PIP_TORCH, source="B")
    c = comparison.compare(plain, shadowed)
    assert _kinds(c.differences) == [("pip-shadowing", "torch")]
    assert c.inside_a == () and _kinds(c.inside_b) == [("two-torches", "torch")]
    back = comparison.compare(shadowed, plain)
    assert [(f.kind, f.subject, f.reference) for f in back.differences] == [
        (Kind.MISSING, "torch", PIP_TORCH.identity())
    ]


def test_every_manager_both_sides_have_is_compared() -> None:
    newer = Package("torch", "2.2.0", manager="pip")
    c = comparison.compare(_env(PYTORCH, PIP_TORCH), _env(PYTORCH, newer, source="B"))
    assert _kinds(c.differences) == [("version-differs", "torch")]


# --- issue 25 (and 19): ``envtool diff F F`` of a file where pip shadows conda -------------
SHADOWED_EXPORT = """\
name: shadowed
channels: [conda-forge]
dependencies:
  - python=3.9.18=h0755675_1_cpython
  - numpy=1.26.4=py39h474f0d3_0
  - pytorch=1.11.0=cuda112py39ha0cca9b_1
  - pytorch-gpu=1.11.0=cuda112py39h68407e5_1
  - pip:
      - numpy==1.26.4
      - torch==1.12.1
prefix: /home/u/envs/shadowed
"""


SHADOWED_LOCK = (  # name, version, manager, file (conda-forge's, or a wheel)
    ("python", "3.9.18", "conda", "python-3.9.18-h0755675_1_cpython.conda"),
    ("numpy", "1.26.4", "conda", "numpy-1.26.4-py39h474f0d3_0.conda"),
    ("pytorch", "1.11.0", "conda", "pytorch-1.11.0-cuda112py39ha0cca9b_1.tar.bz2"),
    ("pytorch-gpu", "1.11.0", "conda", "pytorch-gpu-1.11.0-cuda112py39h68407e5_1.tar.bz2"),
    ("numpy", "1.26.4", "pip", "numpy-1.26.4-cp39-cp39-manylinux_2_17_x86_64.whl"),
    ("torch", "1.12.1", "pip", "torch-1.12.1-cp39-cp39-manylinux1_x86_64.whl"),
)


def _shadowed_lock() -> str:
    """A conda-lock v1 file of SHADOWED_LOCK (the digests are placeholders)."""
    out = HEAD
    for name, version, manager, file in SHADOWED_LOCK:
        if manager == "conda":
            url = f"https://conda.anaconda.org/conda-forge/linux-64/{file}"
            digest = f"md5: '{hashlib.md5(file.encode()).hexdigest()}'"
        else:
            url = f"https://files.pythonhosted.org/packages/ab/cd/{file}"
            digest = f"sha256: '{hashlib.sha256(file.encode()).hexdigest()}'"
        out += (
            f"- name: {name}\n  version: {version}\n  manager: {manager}\n"
            f"  platform: linux-64\n  dependencies: {{}}\n  url: {url}\n"
            f"  hash: {{{digest}}}\n  category: main\n  optional: false\n"
        )
    return out


@pytest.mark.parametrize("form", ["export", "lock"])
def test_a_file_where_pip_shadows_conda_is_identical_to_itself(tmp_path: Path, form: str) -> None:
    """pip's numpy and torch over conda's, and pytorch's pytorch-gpu metapackage beside: the
    file against itself is "identical", exit 0; what is wrong inside it is said apart."""
    path = tmp_path / ("environment.yml" if form == "export" else "conda-lock.yml")
    path.write_text(SHADOWED_EXPORT if form == "export" else _shadowed_lock())
    code, out, err = run_main(main, tmp_path, [], ("diff", str(path), str(path)))
    assert code == 0 and out.startswith(f"identical: {path}"), out + err
    assert "not a difference" in out and "two-torches" in out and "pip-shadowing" in out
    env = environments.load(str(path))
    c = comparison.compare(env, env)
    assert c.identical and _kinds(c.inside_a) == [
        ("two-torches", "torch"),
        ("pip-shadowing", "numpy"),
    ]
    two = c.inside_a[0]
    assert {p.name for p in two.packages} == {"pytorch", "torch"}  # not the metapackage
