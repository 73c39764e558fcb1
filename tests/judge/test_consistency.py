"""Inconsistencies inside one environment (judge/consistency.py, ``envtool check``): each rule
on the environments the issue names, written as conda writes them, and silence on the real
consistent ones (../shared/data/real and the shipped lock)."""

from __future__ import annotations

import hashlib
import json
from functools import partial
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


# --- issue 25 item 2: no false alarms (abi3 builds, CPU-only platforms) ---------------------
#
# What conda-forge ships, as a conda-lock v1 file would hold it. The shape of the abi3 records
# follows conda-forge/hf-xet-feedstock (recipe/recipe.yaml: ``python: version_independent:
# true``, host ``python-abi3``, skip unless ``is_abi3``; .ci_support/linux_64_is_abi3true
# python3.10.____cpython.yaml: built once, with ``python 3.10.* *_cpython``, so the build string
# is ``py310h…``), conda-forge/polars-feedstock (recipe/recipe.yaml, python_min 3.9, the same
# abi3 markup) and CEP 20 (conda/ceps cep-0020.md: python-abi3 X.Y adds ``cpython >=X.Y``;
# conda-forge's adds ``_python_abi3_support 1.*``). The hash part of every build string
# and the md5s are placeholders; names, versions, build shapes, dependencies and channels are
# as conda-forge and the pytorch channel publish them (pytorch-mutex is noarch there).
LOCK_HEAD = """\
version: 1
metadata:
  content_hash: {{{hashes}}}
  channels: [{{url: conda-forge, used_env_vars: []}}, {{url: pytorch, used_env_vars: []}}]
  platforms: [{platforms}]
  sources: [environment.yml]
package:
"""
PY312 = {"python": "", "python_abi": "3.12.* *_cp312"}
ABI3_310 = {"_python_abi3_support": "1.*", "cpython": ">=3.10", "python": ""}


def _entry(
    platform: str,
    name: str,
    version: str,
    build: str,
    deps: dict[str, str] | None = None,
    channel: str = "conda-forge",
    subdir: str = "",
) -> str:
    url = f"https://conda.anaconda.org/{channel}/{subdir or platform}/{name}-{version}-{build}"
    url += ".tar.bz2" if channel == "pytorch" else ".conda"
    md5 = hashlib.md5(url.encode()).hexdigest()
    dep = "{" + ", ".join(f"{k}: '{v}'" for k, v in (deps or {}).items()) + "}"
    return (
        f"- name: {name}\n  version: {version}\n  manager: conda\n  platform: {platform}\n"
        f"  dependencies: {dep}\n  url: {url}\n  hash: {{md5: {md5}}}\n"
        "  category: main\n  optional: false\n"
    )


def _python312(platform: str) -> list[str]:
    """python 3.12 and the packages every conda-forge abi3 build pulls in."""
    e = partial(_entry, platform)
    return [
        e("python", "3.12.7", "hc5c86c4_0_cpython"),
        e("python_abi", "3.12", "5_cp312"),
        e("cpython", "3.12.7", "py312hd8ed1ab_0", {"python": "3.12.7.*"}, subdir="noarch"),
        e("_python_abi3_support", "1.0", "hd8ed1ab_2", {"cpython": ""}, subdir="noarch"),
        e("numpy", "2.1.3", "py312h58c1407_0", PY312),
        # abi3: built once with python 3.10 (hf-xet) / 3.9 (polars), run on any later CPython
        e("hf-xet", "1.1.5", "py310hb823017_3", {**ABI3_310, "libgcc": ">=13"}),
        e("polars-default", "1.31.0", "py39hf521cc8_1", {**ABI3_310, "cpython": ">=3.9"}),
        e("polars", "1.31.0", "default_h1650462_1", {"polars-default": "1.31.0"}),
    ]


def _torch(platform: str) -> list[str]:
    """PyTorch 2.5.1: CUDA 12.4 on linux-64; on osx-64 and linux-aarch64 conda-forge's CPU
    builds beside the pytorch channel's ``pytorch-mutex=1.0=cpu`` (noarch), its only package."""
    e, cv = partial(_entry, platform), {"cuda-version": ">=12.4,<13"}
    if platform == "linux-64":
        return [
            e("pytorch", "2.5.1", "cuda124_py312h1a2b3c4_305", {**PY312, **cv}),
            e("libtorch", "2.5.1", "cuda124_h1a2b3c4_305", cv),
            e("cuda-version", "12.4", "h3060b56_3", subdir="noarch"),
            e("cuda-cudart", "12.4.127", "he02047a_2", cv),
            e("nccl", "2.23.4.1", "h52f6c39_3", cv),
        ]
    cpu = "cpu_mkl_py312h1a2b3c4_105" if platform == "osx-64" else "cpu_generic_py312h1a2b3c4_5"
    return [
        e("pytorch", "2.5.1", cpu, PY312),
        e("libtorch", "2.5.1", cpu.replace("_py312", "")),
        e("pytorch-mutex", "1.0", "cpu", channel="pytorch", subdir="noarch"),
    ]


def _lock(tmp_path: Path, platforms: dict[str, list[str]], name: str = "lock") -> Path:
    hashes = ", ".join(f"{p}: abc" for p in platforms)
    text = LOCK_HEAD.format(hashes=hashes, platforms=", ".join(platforms))
    text += "".join(e for entries in platforms.values() for e in entries)
    path = tmp_path / f"{name}.conda-lock.yml"
    path.write_text(text)
    return path


PLATFORMS = ("linux-64", "osx-64", "linux-aarch64")


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_consistent_abi3_and_cpu_lock_is_consistent_on_every_platform(
    tmp_path: Path, platform: str
) -> None:
    """hf-xet/polars ``py310``/``py39`` abi3 builds in Python 3.12, and CPU platforms with the
    pytorch channel's ``pytorch-mutex=1.0=cpu``: nothing is wrong, on any platform (before:
    "built for another python" on every platform, "CUDA stacks mixed" on the CPU ones)."""
    path = _lock(tmp_path, {p: _python312(p) + _torch(p) for p in PLATFORMS})
    env = environments.load(str(path), platform)
    assert {p.name for p in env.packages} >= {"hf-xet", "polars-default", "pytorch"}
    assert consistency.check(env) == []
    code, out, err = run_main(main, tmp_path, [], ("check", str(path), "--platform", platform))
    assert code == 0 and out.startswith("consistent: "), out + err
    cpu_only = _lock(tmp_path, {platform: _torch(platform)}, "cpu")  # no abi3 package at all
    assert consistency.check(environments.load(str(cpu_only), platform)) == []


def test_an_abi3_build_newer_than_the_python_or_a_plain_older_build_is_still_found(
    tmp_path: Path,
) -> None:
    """The abi3 floor is a floor: ``cpython >=3.13`` does not run on 3.12; and a plain
    ``py310`` build (``python_abi 3.10.* *_cp310``) is wrong beside ``_python_abi3_support``."""
    platform = "linux-64"
    e = partial(_entry, platform)
    newer = e("hf-xet", "1.1.5", "py313hb823017_3", {**ABI3_310, "cpython": ">=3.13"})
    py310 = {"python": ">=3.10,<3.11.0a0", "python_abi": "3.10.* *_cp310"}
    plain = e("scipy", "1.14.1", "py310h23e1e69_1", py310)
    entries = [x for x in _python312(platform) if "name: hf-xet" not in x] + [newer, plain]
    env = environments.load(str(_lock(tmp_path, {platform: entries})), platform)
    (f,) = consistency.check(env)
    assert f.kind is Kind.OTHER_PYTHON and f.expected == "3.12"
    assert sorted(p.name for p in f.packages) == ["hf-xet", "scipy"]


@pytest.mark.parametrize(
    ("build", "depends", "floor"),
    [
        ("py310hb823017_3", ("_python_abi3_support 1.*", "cpython >=3.10", "python"), "3.10"),
        ("py39hf521cc8_1", ("cpython >=3.9",), "3.9"),
        ("py38h1234567_0", ("python", "python_abi * *_abi3"), "3.8"),
        ("py310hb823017_3", ("_python_abi3_support 1.*",), "3.10"),
        ("py310h23e1e69_1", ("python >=3.10,<3.11.0a0", "python_abi 3.10.* *_cp310"), None),
        ("py310h23e1e69_1", (), None),
    ],
)
def test_the_floor_of_an_abi3_build(
    build: str, depends: tuple[str, ...], floor: str | None
) -> None:
    pkg = Package("x", "1", build, "conda-forge", depends=depends)
    assert consistency.abi3_floor(pkg) == floor


def test_an_export_of_an_abi3_environment_records_no_dependencies(tmp_path: Path) -> None:
    """conda env export writes no dependencies: a ``py310`` build in 3.12 is taken for abi3
    where the environment holds ``_python_abi3_support`` (what every conda-forge abi3 build
    pulls in), and is still wrong where it does not."""
    deps = (
        "python=3.12.7=hc5c86c4_0_cpython",
        "_python_abi3_support=1.0=hd8ed1ab_2",
        "cpython=3.12.7=py312hd8ed1ab_0",
        "hf-xet=1.1.5=py310hb823017_3",
        "numpy=2.1.3=py312h58c1407_0",
    )
    assert consistency.check(_export(tmp_path, "abi3", deps)) == []
    (f,) = consistency.check(_export(tmp_path, "plain", deps[:1] + deps[3:]))
    assert f.kind is Kind.OTHER_PYTHON and [p.name for p in f.packages] == ["hf-xet"]


def test_cpu_builds_carry_no_cuda_stack() -> None:
    """The pytorch channel's CPU mutex and osx build beside conda-forge's CPU or CUDA pytorch
    are no second CUDA stack; its ``pytorch-mutex=1.0=cuda`` still is."""
    cf_cpu = Package("pytorch", "2.5.1", "cpu_mkl_py312h1a2b3c4_105", "conda-forge")
    cf_cuda = Package("pytorch", "2.5.1", "cuda124_py312h1a2b3c4_305", "conda-forge")
    mutex_cpu = Package("pytorch-mutex", "1.0", "cpu", "pytorch")
    osx = Package("torchvision", "0.20.1", "py312_cpu", "pytorch")
    for torch in (cf_cpu, cf_cuda):
        assert consistency.stacks_mixed(Environment("l", "lock", (torch, mutex_cpu, osx))) == []
    mutex_cuda = Package("pytorch-mutex", "1.0", "cuda", "pytorch")
    (f,) = consistency.stacks_mixed(Environment("l", "lock", (cf_cuda, mutex_cuda)))
    assert f.kind is Kind.CUDA_STACKS_MIXED


def test_two_torches_names_pytorch_not_its_metapackage() -> None:
    """conda-forge's pytorch-gpu beside pytorch and a pip torch: the two torches are pytorch
    and torch, in any order of the records (before: whichever came last of the two)."""
    pytorch = Package("pytorch", "1.11.0", "cuda112py39ha0cca9b_1", "conda-forge")
    gpu = Package("pytorch-gpu", "1.11.0", "cuda112py39h68407e5_1", "conda-forge")
    pip = Package("torch", "1.12.1", manager="pip")
    for order in ((pytorch, gpu, pip), (gpu, pytorch, pip)):
        (f,) = consistency.two_torches(Environment("e", "export", order))
        assert {p.name for p in f.packages} == {"pytorch", "torch"}
