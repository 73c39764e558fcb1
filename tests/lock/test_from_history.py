"""Spec lists (``conda env export --from-history``, exports edited to bare names) are read as
specs, as ``conda env create`` reads them, and ``envtool diff`` says which package of a lock
meets or violates each one (environments.py, judge/specs.py). The locks are real: a pixi.lock
pixi 0.26 wrote (tests/lock/data/SOURCES.md) and a conda-lock file envtool solved from the
tests' channel. No conda installs here, so the spec lists are written the way conda writes
them (name, channels, the specs as typed, prefix)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Project, run_main

from envtool import environments
from envtool.cli import main

PIXI = Path(__file__).parent / "data" / "try-pixi.v5.pixi.lock"
HISTORY = """\
name: ddp
channels:
  - pytorch
  - nvidia
  - conda-forge
dependencies:
{deps}
prefix: /home/user/miniconda3/envs/ddp
"""


def _history(tmp_path: Path, *deps: str, name: str = "history.yml") -> Path:
    path = tmp_path / name
    path.write_text(HISTORY.format(deps="\n".join(f"  - {d}" for d in deps)))
    return path


def _diff(tmp_path: Path, a: Path, b: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    argv = ("diff", str(a), str(b), "--format", "json", "--all", *extra)
    code, out, err = run_main(main, tmp_path, [], argv)
    return code, (json.loads(out) if out else {}), err


def test_each_spec_is_met_or_violated_by_a_package_of_the_lock(tmp_path: Path) -> None:
    history = _history(
        tmp_path, "python=3.12", "pytorch::pytorch>=2.3", "pytorch-cuda=12.1", "numpy",
        "mkl<2023", "conda-forge::pytorch-mutex", "pytorch[build=*cuda11.8*]",
    )  # fmt: skip
    code, doc, err = _diff(tmp_path, history, PIXI, "--platform", "win-64", "-e", "cuda118")
    found = {(f["kind"], f["subject"], f["expected"], f["actual"]) for f in doc["findings"]}
    unmet = "spec-unmet"
    assert code == 1 and found == {
        (unmet, "pytorch-cuda", "pytorch-cuda=12.1", "pytorch-cuda=11.8=h24eeafa_5 from pytorch"),
        (unmet, "numpy", "numpy", "absent"),
        (unmet, "mkl", "mkl<2023", "mkl=2023.1.0=h6a75c08_48682 from conda-forge"),
        (
            unmet,
            "pytorch-mutex",
            "conda-forge::pytorch-mutex",
            "pytorch-mutex=1.0=cuda from pytorch",
        ),
    }, err
    severity = {f["subject"]: f["severity"] for f in doc["findings"]}
    assert severity["pytorch-cuda"] == "error" and severity["mkl"] == "warning"
    met = {s["spec"]: s["package"] for s in doc["specs"] if s["met"]}
    assert met == {
        "python=3.12": "python=3.12.5=h889d299_0_cpython",
        "pytorch::pytorch>=2.3": "pytorch=2.3.1=py3.12_cuda11.8_cudnn8_0",
        "pytorch[build=*cuda11.8*]": "pytorch=2.3.1=py3.12_cuda11.8_cudnn8_0",
    }
    assert [s["line"] for s in doc["specs"]] == [7, 8, 9, 10, 11, 12, 13]


def test_a_lock_meeting_every_spec_is_no_difference_whatever_else_it_holds(
    tmp_path: Path,
) -> None:
    history = _history(tmp_path, "python>=3.11", "pytorch=2.3", "pytorch-cuda=12.1.*")
    for a, b in ((history, PIXI), (PIXI, history)):  # the spec list on either side
        argv = ("diff", str(a), str(b), "--platform", "win-64", "-e", "cuda121")
        code, out, err = run_main(main, tmp_path, [], argv)
        assert code == 0, out + err
        assert out.startswith(f"3 of 3 specs of {'A' if a == history else 'B'} ({history})")
        assert "pytorch=2.3: pytorch=2.3.1=py3.12_cuda12.1_cudnn8_0" in out
        assert "identical" not in out and "extra" not in out  # 69 packages, none named


def test_a_hand_edited_export_mixes_pins_bare_names_and_pip(
    project: Project, tmp_path: Path
) -> None:
    code, _, err = project.run("lock")
    assert code == 0, err
    edited = tmp_path / "edited.yml"
    edited.write_text(
        "name: ddp\nchannels:\n  - local\ndependencies:\n"
        "  - numpy=1.26.4=py39h474f0d3_0\n  - nccl=2.16.5.1=h0800d71_0\n  - pytorch\n"
        "  - cudatoolkit=11.8\n  - pip\n  - pip:\n    - requests\n    - torch==2.1.0\n"
    )
    env = environments.load(str(edited))
    assert env.kind == "specs" and not env.packages
    assert [(s.name, s.manager, s.line) for s in env.specs] == [
        ("numpy", "conda", 5), ("nccl", "conda", 6), ("pytorch", "conda", 7),
        ("cudatoolkit", "conda", 8), ("pip", "conda", 9), ("requests", "pip", 11),
        ("torch", "pip", 12),
    ]  # fmt: skip
    code, doc, err = _diff(tmp_path, edited, project.lock)
    found = {(f["subject"], f["expected"], f["actual"]) for f in doc["findings"]}
    channel = project.channel.as_uri()  # a channel without a name is its URL
    assert code == 1 and found == {
        ("nccl", "nccl=2.16.5.1=h0800d71_0", f"nccl=2.18.3.1=h12f7317_0 from {channel}"),
        ("requests", "requests (pip)", "absent"),
        ("torch", "torch==2.1.0 (pip)", "conda pytorch=2.1.0=cuda118_py39h0a6d3b2_300"),
    }, err


def test_an_export_conda_writes_stays_an_export(tmp_path: Path) -> None:
    """Every entry name=version[=build] (conda env export, --no-builds too): packages."""
    export = tmp_path / "export.yml"
    export.write_text("name: x\ndependencies:\n  - python=3.9.18\n  - numpy=1.26.4=py39_0\n")
    env = environments.load(str(export))
    assert env.kind == "export" and not env.specs
    assert [p.label() for p in env.packages] == ["python=3.9.18", "numpy=1.26.4=py39_0"]


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("numpy >=>1", "not a package spec (unable to parse version spec: >=>1)"),
        ("-e foo", "'-e' is not a package name"),
        ("{a: 1}", "expected '- pip: [name, ...]'"),
        ("'num*'", "not a package spec"),
    ],
)
def test_a_line_that_is_no_spec_is_refused_with_its_line(
    tmp_path: Path, entry: str, said: str
) -> None:
    history = _history(tmp_path, "numpy", entry)
    code, out, err = run_main(main, tmp_path, [], ("diff", str(history), str(PIXI)))
    assert code == 2 and not out and err.count("\n") == 1, err
    assert f"{history}:8: " in err and said in err


def test_two_spec_lists_and_a_spec_list_as_verifys_lock_are_refused(tmp_path: Path) -> None:
    a, b = _history(tmp_path, "numpy"), _history(tmp_path, "python", name="b.yml")
    code, _, err = run_main(main, tmp_path, [], ("diff", str(a), str(b)))
    assert code == 2 and "two spec lists" in err
    argv = ("verify", "--transport", "local", "--hosts", "localhost", "--lockfile", str(a))
    code, _, err = run_main(main, tmp_path, [], argv)
    assert code == 2 and err.count("\n") == 1
    assert f"{a}:6: an environment file or conda env export, not a lock" in err
