"""Inconsistencies inside one environment (judge/consistency.py, ``envtool check``): each rule
on the environments the issue names, written as conda writes them, and silence on the real
consistent ones (../shared/data/real and the shipped lock)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO, run_main

from envtool import environments
from envtool.cli import main
from envtool.judge import consistency, cuda, gpu
from envtool.judge.findings import Kind
from envtool.models import Environment, Package

EXPORT = "name: {name}\nchannels: [defaults]\ndependencies:\n{deps}prefix: /home/u/envs/{name}\n"

# conda pytorch 1.13.1 (cuda112) plus a pip torch 2.3.1 with nvidia-*-cu12 wheels beside
# cudatoolkit 11.8 and a conda nccl
TWO_TORCHES = (
    "python=3.9.18=h0755675_1_cpython",
    "pytorch=1.13.1=cuda112py39hb0b7ed5_200",
    "cudatoolkit=11.8.0=h4ba93d1_13",
    "nccl=2.18.3.1=h12f7317_0",
    {"pip": ["torch==2.3.1", "nvidia-cublas-cu12==12.1.3.1", "nvidia-nccl-cu12==2.20.5"]},
)
# conda cudatoolkit 11.8 and cudnn 8.8 beside a pip torch 2.7 on CUDA 12.6 wheels
PIP_TORCH_CU126 = (
    "python=3.11.9=hb806964_0_cpython",
    "cudatoolkit=11.8.0=h4ba93d1_13",
    "cudnn=8.8.0.121=h838ba91_3",
    {
        "pip": [
            "torch==2.7.0+cu126",
            "nvidia-cuda-runtime-cu12==12.6.77",
            "nvidia-cudnn-cu12==9.5.1.17",
        ]
    },
)
# cuda-version 12.9 beside cuda-runtime 12.4.1
CUDA_VERSION = (
    "python=3.11.9=hb806964_0_cpython",
    "cuda-version=12.9=h4f385c5_3",
    "cuda-runtime=12.4.1=ha804496_0",
    "cuda-cudart=12.4.127=he02047a_2",
)


def _export(tmp_path: Path, name: str, deps: tuple[object, ...]) -> Environment:
    lines = ""
    for dep in deps:
        if isinstance(dep, dict):
            lines += "  - pip:\n" + "".join(f"      - {p}\n" for p in dep["pip"])
        else:
            lines += f"  - {dep}\n"
    path = tmp_path / f"{name}.yml"
    path.write_text(EXPORT.format(name=name, deps=lines))
    return environments.load(str(path))


def _kinds(env: Environment) -> list[Kind]:
    return [f.kind for f in consistency.check(env)]


def test_two_torches_two_cuda_majors_and_two_nccls(tmp_path: Path) -> None:
    env = _export(tmp_path, "two", TWO_TORCHES)
    found = {f.kind: f for f in consistency.check(env)}
    assert set(found) == {Kind.TWO_TORCHES, Kind.CUDA_MIXED, Kind.TWO_NCCLS}
    assert {p.label() for p in found[Kind.TWO_TORCHES].packages} == {
        "pytorch=1.13.1=cuda112py39hb0b7ed5_200",
        "torch==2.3.1",
    }
    assert found[Kind.CUDA_MIXED].expected == "11 and 12"
    assert {p.name for p in found[Kind.TWO_NCCLS].packages} == {"nccl", "nvidia-nccl-cu12"}


def test_a_pip_torch_on_cuda_12_beside_a_conda_cuda_11(tmp_path: Path) -> None:
    env = _export(tmp_path, "cu126", PIP_TORCH_CU126)
    (f,) = consistency.check(env)
    assert f.kind is Kind.CUDA_MIXED
    assert {p.name for p in f.packages} >= {"cudatoolkit", "torch", "nvidia-cuda-runtime-cu12"}


def test_cuda_version_unlike_the_runtime_packages(tmp_path: Path) -> None:
    env = _export(tmp_path, "cv", CUDA_VERSION)
    (f,) = consistency.check(env)
    assert f.kind is Kind.CUDA_VERSION_MISMATCH and f.expected == "12.9"
    assert {p.name for p in f.packages} == {"cuda-version", "cuda-runtime", "cuda-cudart"}
    same = tuple(
        d.replace("12.4.1=", "12.9.1=").replace("12.4.127", "12.9.79") for d in CUDA_VERSION
    )
    assert consistency.check(_export(tmp_path, "cv-ok", same)) == []


def test_the_pytorch_channel_and_conda_forge_stacks_mixed() -> None:
    """conda-forge pytorch cuda118 with cudatoolkit 11.8 beside the pytorch channel's
    pytorch-cuda 12.1 and the nvidia channel's cuda-runtime 12.1 (a lock records channels)."""
    pkgs = (
        Package("python", "3.10.14", "hd12c33a_0_cpython", "conda-forge"),
        Package("pytorch", "2.1.2", "cuda118_py310h3bf0ca8_300", "conda-forge"),
        Package("cudatoolkit", "11.8.0", "h4ba93d1_13", "conda-forge"),
        Package("pytorch-cuda", "12.1", "ha16c6d3_5", "pytorch"),
        Package("cuda-runtime", "12.1.0", "0", "nvidia"),
    )
    found = {f.kind: f for f in consistency.check(Environment("lock", "lock", pkgs))}
    assert set(found) == {Kind.CUDA_STACKS_MIXED, Kind.CUDA_MIXED}
    assert {p.channel for p in found[Kind.CUDA_STACKS_MIXED].packages} == {
        "conda-forge",
        "pytorch",
        "nvidia",
    }
    one_stack = tuple(p for p in pkgs if p.channel == "conda-forge")
    assert consistency.check(Environment("lock", "lock", one_stack)) == []


@pytest.mark.parametrize(
    ("build", "python"),
    [
        ("py38h1234567_0", "3.8"),
        ("py3.8_cuda11.3_cudnn8.2.0_0", "3.8"),
        ("cp38", "3.8"),
        ("np126py38h1234567_0", "3.8"),
        ("pyhd8ed1ab_0", None),
        ("h0755675_1_cpython", None),
    ],
)
def test_the_python_a_build_is_for(build: str, python: str | None) -> None:
    assert consistency.python_of(build) == python


def test_a_build_for_another_python(tmp_path: Path) -> None:
    deps = (
        "python=3.9.18=h0755675_1_cpython",
        "numpy=1.24.4=py38h59b608b_0",
        "six=1.16.0=pyh6c4a22f_0",
    )
    (f,) = consistency.check(_export(tmp_path, "py", deps))
    assert f.kind is Kind.OTHER_PYTHON and f.expected == "3.9"
    assert [p.name for p in f.packages] == ["numpy"]


@pytest.mark.parametrize(
    "name",
    [
        "basenji.env-export.yml",
        "breaching.env-export.yml",
        "lanxiukai.env-export-nobuilds.yml",
        "pangeo-pytorch.conda-lock.yml",
        "drdmannturb.conda-lock.yml",
    ],
)
def test_real_consistent_environments_give_nothing(shared_data: Path, name: str) -> None:
    env = environments.load(str(shared_data / "real" / name))
    assert len(env.packages) > 100 and consistency.check(env) == []


def test_cuda_read_in_every_packaging(shared_data: Path) -> None:
    pangeo = environments.load(str(shared_data / "real" / "pangeo-pytorch.conda-lock.yml"))
    assert cuda.env_cuda(pangeo) == "11.8"  # cuda-version 11.8 / cudatoolkit 11.8
    lanxiukai = environments.load(str(shared_data / "real" / "lanxiukai.env-export-nobuilds.yml"))
    assert cuda.env_cuda(lanxiukai) == "13.0"  # torch 2.9.1+cu130 and nvidia-cuda-runtime 13.0
    assert cuda.driver_floor("12.4") == ("525.60.13", "550.54.14")
    assert cuda.driver_floor("12.7") == ("525.60.13", None)  # a minor the table lacks
    assert cuda.driver_floor("13.0") == ("580.65.06", "580.65.06")
    assert gpu.locked_cuda(lanxiukai) == "13.0"


def test_envtool_check_cli(tmp_path: Path) -> None:
    bad = tmp_path / "two.yml"
    _export(tmp_path, "two", TWO_TORCHES)
    code, out, _ = run_main(
        main, tmp_path, [], ("check", str(bad), str(REPO / "conda-lock.yml"), "--format", "json")
    )
    assert code == 1
    doc = json.loads(out)
    assert doc["schema"] == "envtool.check/1" and doc["consistent"] is False
    first, shipped = doc["environments"]
    assert {f["kind"] for f in first["findings"]} == {"two-torches", "cuda-mixed", "two-nccls"}
    assert shipped["findings"] == [] and shipped["packages"] == 68
    code, out, _ = run_main(main, tmp_path, [], ("check", str(REPO / "conda-lock.yml")))
    assert code == 0 and "consistent: " in out
    code, _, err = run_main(main, tmp_path, [], ("check", str(tmp_path / "none.yml")))
    assert code == 2 and err.count("\n") == 1
