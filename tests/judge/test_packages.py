"""The pure diff: findings per package between two environments."""

from __future__ import annotations

from pathlib import Path

import pytest

from envtool import environments as envread
from envtool.errors import InputError
from envtool.judge import packages as drift
from envtool.models import Environment, Package
from envtool.report.labels import words


def _env(*pkgs: Package, source: str = "B") -> Environment:
    return Environment(source, "probe", pkgs)


CF = "conda-forge"
TORCH = Package("pytorch", "2.1.0", "cuda118_py39h0a6d3b2_300", CF)
NCCL = Package("nccl", "2.18.3.1", "h12f7317_0", CF)
NUMPY = Package("numpy", "1.26.4", "py39h474f0d3_0", CF)
REF = _env(TORCH, NCCL, NUMPY, source="A")


def kinds(findings: list) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    return [(f.kind, f.subject) for f in findings]


def test_identical_environments_have_no_findings() -> None:
    assert drift.diff(REF, _env(NUMPY, NCCL, TORCH)) == []


def test_build_differs_cuda_vs_cpu() -> None:
    cpu = Package("pytorch", "2.1.0", "cpu_py39h6b5f3f5_0", CF)
    (f,) = drift.diff(REF, _env(cpu, NCCL, NUMPY))
    assert (f.kind, f.severity, f.subject) == ("build-differs", "error", "pytorch")
    assert "cuda118" in words(f).expected and "cpu_" in words(f).actual


def test_missing_extra_version_channel() -> None:
    old_nccl = Package("nccl", "2.16.5.1", "h0800d71_0", CF)
    numpy_other = Package("numpy", "1.26.4", "py39h474f0d3_0", "https://example.org/mirror")
    extra = Package("zlib", "1.3", "0", CF)
    found = drift.diff(REF, _env(old_nccl, numpy_other, extra))
    assert kinds(found) == [
        ("version-differs", "nccl"),
        ("channel-differs", "numpy"),
        ("missing", "pytorch"),
        ("extra", "zlib"),
    ]
    assert {f.kind: f.severity for f in found}["extra"] == "warning"


def test_pip_torch_shadowing_conda_pytorch() -> None:
    pip_torch = Package("torch", "2.1.0", manager="pip")
    found = drift.diff(REF, _env(TORCH, NCCL, NUMPY, pip_torch))
    assert kinds(found) == [("pip-shadowing", "torch")]  # the conda builds themselves agree


def test_manager_differs_without_builds() -> None:
    found = drift.diff(REF, _env(TORCH, NCCL, Package("numpy", "1.26.4", manager="pip")))
    assert kinds(found) == [("manager-differs", "numpy")]


def test_no_builds_side_compares_versions_only() -> None:
    nobuild = _env(
        Package("pytorch", "2.1.0"), Package("nccl", "2.18.3.1"), Package("numpy", "1.26.4")
    )
    assert drift.diff(REF, nobuild) == []


def test_real_exports_parse_and_diff(shared_data: Path) -> None:
    real = shared_data / "real"
    breaching = envread.load(str(real / "breaching.env-export.yml"))
    nobuilds = envread.load(str(real / "lanxiukai.env-export-nobuilds.yml"))
    basenji = envread.load(str(real / "basenji.env-export.yml"))
    assert sum(p.manager == "conda" for p in breaching.packages) == 278
    assert sum(p.manager == "pip" for p in breaching.packages) == 39
    assert sum(p.manager == "pip" for p in nobuilds.packages) == 26
    assert all(p.build == "" for p in nobuilds.packages)
    torch = {p.name: p for p in breaching.packages}["pytorch"]
    assert torch.build == "py3.9_cuda11.3_cudnn8.2.0_0"
    found = drift.diff(breaching, basenji)
    assert ("missing", "pytorch") in kinds(found)
    assert drift.diff(basenji, basenji) == []


def test_lock_vs_its_own_export_shape(shared_data: Path) -> None:
    lock = envread.load(str(shared_data / "real" / "drdmannturb.conda-lock.yml"), "linux-64")
    assert {p.name: p for p in lock.packages}["pytorch"].channel == "conda-forge"
    win = envread.load(str(shared_data / "real" / "drdmannturb.conda-lock.yml"), "win-64")
    found = drift.diff(lock, win)
    torch = [f for f in found if f.subject == "pytorch"]
    assert torch and torch[0].kind == "version-differs"  # 2.4.0 cuda118 vs 2.3.0 cpu


def test_unreadable_inputs(tmp_path: Path) -> None:
    bad = tmp_path / "x.yml"
    bad.write_text("name: x\ndependencies:\n  - numpy=1.2=a=b\n")
    with pytest.raises(InputError, match=r"x\.yml:3: expected 'name=version\[=build\]'"):
        envread.load(str(bad))
    bad.write_text('{"packages": [1]}')
    with pytest.raises(InputError, match="package #1"):
        envread.load(str(bad))
    bad.write_text("{nope")
    with pytest.raises(InputError, match=r"x\.yml:1: invalid JSON"):
        envread.load(str(bad))
    bad.write_text("just: text\n")
    with pytest.raises(InputError, match="not a conda-lock file"):
        envread.load(str(bad))


# --- issue 25 item 3: metapackages are not the package ---------------------------------
# A conda-forge environment of 2022 (pytorch with its pytorch-gpu metapackage, both
# cuda112 builds) against one from the pytorch channel (pytorch 1.12.1 for CUDA 11.3 and its
# pytorch-mutex). Build strings have the shapes those channels published; hashes are
# placeholders.
CF_TORCH = Package("pytorch", "1.11.0", "cuda112py39ha0cca9b_1", CF)
CF_GPU = Package("pytorch-gpu", "1.11.0", "cuda112py39h68407e5_1", CF)
PT_TORCH = Package("pytorch", "1.12.1", "py3.9_cuda11.3_cudnn8.3.2_0", "pytorch")
PT_MUTEX = Package("pytorch-mutex", "1.0", "cuda", "pytorch")


def test_a_metapackage_is_a_key_of_its_own_and_torch_is_pytorch() -> None:
    for order in ((CF_TORCH, CF_GPU), (CF_GPU, CF_TORCH)):
        groups = drift.by_key((*order, Package("torch", "1.11.0", manager="pip")))
        assert set(groups) == {"torch", "pytorch-gpu"}
        assert groups["torch"]["conda"] == CF_TORCH and groups["pytorch-gpu"]["conda"] == CF_GPU
        assert drift.effective(groups["torch"]).manager == "pip"
        assert drift.effective({"conda": groups["torch"]["conda"]}) == CF_TORCH


def test_a_pytorch_gpu_environment_diffs_by_its_real_torch_and_names_the_channel() -> None:
    """The torch build that runs is compared (not the metapackage); its channel change is a
    finding of its own beside the version; the metapackage is missing as itself."""
    conda_forge = _env(CF_GPU, CF_TORCH, NCCL, source="A")
    pytorch_channel = _env(PT_TORCH, PT_MUTEX, NCCL)
    found = drift.diff(conda_forge, pytorch_channel)
    assert kinds(found) == [
        ("missing", "pytorch-gpu"),
        ("extra", "pytorch-mutex"),
        ("version-differs", "pytorch"),
        ("channel-differs", "pytorch"),
    ]
    version, channel = found[2], found[3]
    assert (version.reference, version.found) == (CF_TORCH, PT_TORCH)
    assert [f.severity for f in found] == ["error", "warning", "error", "warning"]
    assert "from conda-forge" in words(channel).expected and "pytorch" in words(channel).actual


def test_a_channel_change_with_a_version_change_is_said_for_ddp_packages_only() -> None:
    other_nccl = Package("nccl", "2.19.3.1", "h6103f9b_0", "https://example.org/mirror")
    other_numpy = Package("numpy", "1.26.3", "py39h474f0d3_0", "defaults")
    found = drift.diff(REF, _env(TORCH, other_nccl, other_numpy))
    assert kinds(found) == [
        ("version-differs", "nccl"),
        ("channel-differs", "nccl"),
        ("version-differs", "numpy"),  # a numpy from defaults: its version is enough
    ]


@pytest.mark.parametrize(
    ("name", "a", "b"),
    [
        ("cuda", "12.1.0", "12.4.1"),
        ("cuda-toolkit", "12.1.0", "12.4.1"),
        ("pytorch-cpu", "2.1.0", "2.3.1"),
    ],
)
def test_cuda_and_torch_metapackages_are_compared_as_themselves(name: str, a: str, b: str) -> None:
    one, other = Package(name, a, "0", "nvidia"), Package(name, b, "0", "nvidia")
    (f,) = drift.diff(_env(one, source="A"), _env(other))
    assert (f.kind, f.subject, f.severity) == ("version-differs", name, "error")


def test_hosts_with_the_same_records_are_judged_alike_and_each_on_its_own() -> None:
    """against_lock compares each distinct set of records once: every host that sent it gets
    its findings under its own name, and a host whose records differ by one artifact hash
    (same name, version and build) is not taken for the others."""
    old = Package("nccl", "2.16.5.1", "h0_0", CF)
    forged = Package("nccl", "2.18.3.1", "h12f7317_0", CF, sha256="b" * 64)
    ref = _env(TORCH, Package("nccl", "2.18.3.1", "h12f7317_0", CF, sha256="a" * 64), NUMPY,
               source="A")  # fmt: skip
    envs = {"n1": _env(TORCH, old, NUMPY), "n2": _env(*ref.packages), "n3": _env(TORCH, old, NUMPY),
            "n4": _env(TORCH, forged, NUMPY)}  # fmt: skip
    found = drift.against_lock(ref, envs)
    assert [(f.kind, f.hosts) for f in found] == [
        ("version-differs", ("n1",)), ("version-differs", ("n3",)),
        ("artifact-differs", ("n4",))]  # fmt: skip
