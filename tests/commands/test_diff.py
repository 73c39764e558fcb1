"""``envtool diff``: identical inputs exit 0 whatever each holds; a problem inside one input
is listed under its own heading and is not a difference; a real difference exits 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_main
from test_real_files import FILES, REAL

from envtool.cli import main

# A pip torch over the lock's conda pytorch: what ``pip install torch`` into the env locks to.
PIP_TORCH = """\
- name: torch
  version: 2.4.0
  manager: pip
  platform: linux-64
  dependencies: {}
  url: https://files.pythonhosted.org/packages/torch-2.4.0-cp39-cp39-manylinux1_x86_64.whl
  hash:
    sha256: 1b2f8e2a1a3b5e4e5d2b0c6a7f3e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e
  category: main
  optional: false
"""
ENVIRONMENTS = [name for name in FILES if "/" not in name]  # the locks and exports


def _shadowed(tmp_path: Path) -> Path:
    path = tmp_path / "shadowed.conda-lock.yml"
    path.write_text((REPO / "conda-lock.yml").read_text() + PIP_TORCH)
    return path


def _diff(tmp_path: Path, a: Path, b: Path, *extra: str) -> tuple[int, str, str]:
    return run_main(main, tmp_path, [], ("diff", str(a), str(b), *extra))


def test_a_file_with_a_problem_inside_is_identical_to_itself(tmp_path: Path) -> None:
    f = _shadowed(tmp_path)
    code, out, err = _diff(tmp_path, f, f)
    assert code == 0, err
    assert out.startswith(f"identical: {f} ") and "difference" not in out.splitlines()[0]
    assert f"inside A and B ({f}): 1 problem, not a difference (envtool check {f})" in out
    assert "two-torches" in out and "pip-shadowing" not in out  # one cause, one row
    code, out, _ = _diff(tmp_path, f, f, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["identical"] is True and doc["findings"] == []
    assert (
        [x["kind"] for x in doc["inside_a"]]
        == ["two-torches"]
        == [x["kind"] for x in doc["inside_b"]]
    )


def test_a_difference_still_exits_1_and_the_problem_inside_stays_apart(tmp_path: Path) -> None:
    lock, shadowed = REPO / "conda-lock.yml", _shadowed(tmp_path)
    code, out, _ = _diff(tmp_path, lock, shadowed, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["identical"] is False
    assert [(x["kind"], x["subject"]) for x in doc["findings"]] == [("pip-shadowing", "torch")]
    assert doc["inside_a"] == [] and [x["kind"] for x in doc["inside_b"]] == ["two-torches"]
    code, out, _ = _diff(tmp_path, shadowed, lock)
    assert code == 1 and out.startswith("1 difference: ")
    assert f"inside A ({shadowed}): 1 problem" in out and "inside B" not in out


@pytest.mark.parametrize("name", ENVIRONMENTS)
def test_every_real_environment_is_identical_to_itself(
    shared_data: Path, tmp_path: Path, name: str
) -> None:
    path = shared_data / "real" / name
    code, out, err = _diff(tmp_path, path, path)
    assert code == 0 and out.startswith("identical: "), out + err


def test_two_real_locks_differ(shared_data: Path, tmp_path: Path) -> None:
    real = shared_data / "real"
    a, b = real / "pangeo-pytorch.conda-lock.yml", real / "breaching.env-export.yml"
    code, out, _ = _diff(tmp_path, a, b)
    assert code == 1 and " differences: " in out.splitlines()[0]


def test_the_real_environments_are_there(shared_data: Path) -> None:
    assert REAL.is_dir() and len(ENVIRONMENTS) >= 5, ENVIRONMENTS


ENVTOOL = str(Path(sys.executable).parent / "envtool")


def _specs(doc: dict[str, object]) -> set[str]:
    """Every package spec (name=version=build) the JSON report names in expected/found."""
    found = doc["findings"]
    assert isinstance(found, list)
    return {word.strip("(),") for f in found for key in ("expected", "actual")
            for word in f[key].split() if "=" in word}  # fmt: skip


@pytest.mark.parametrize(
    ("a", "b"),
    [("pangeo-pytorch.conda-lock.yml", "drdmannturb.conda-lock.yml"),
     ("breaching.env-export.yml", "basenji.env-export.yml")],
)  # fmt: skip
@pytest.mark.parametrize("columns", ["80", "40", None])  # None: a pipe, no COLUMNS
def test_a_grep_of_the_output_finds_every_spec(
    shared_data: Path, tmp_path: Path, a: str, b: str, columns: str | None
) -> None:
    """Issue 37 item 4: ``envtool diff A B | grep SPEC`` finds each spec the diff reports (a
    rich table cut them mid-token: ``pytorch=1.10.1=py3.9_cuda1`` / ``1.3_cudnn8...``)."""
    real = shared_data / "real"
    argv = [ENVTOOL, "diff", str(real / a), str(real / b), "--all"]
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env |= {"COLUMNS": columns} if columns else {}
    text = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)
    doc = subprocess.run([*argv, "--format", "json"], capture_output=True, text=True, env=env,
                         timeout=120, check=False)  # fmt: skip
    assert text.returncode == doc.returncode == 1, text.stderr
    specs = _specs(json.loads(doc.stdout))
    assert len(specs) > 50
    lines = text.stdout.splitlines()
    missed = [s for s in specs if not any(s in line for line in lines)]
    assert missed == [], missed[:5]
    assert "┃" not in text.stdout and "│" not in text.stdout  # blocks, as verify's, no grid
    width = int(columns or 100)  # a block's lines fold to the width unless one word is longer
    assert all(len(ln) <= width or " " not in ln.strip() or "=" in ln for ln in lines)
