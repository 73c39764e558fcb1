"""The runtime as loaded against the lock and the prefix (judge/runtime.py), pure: versions,
CUDA builds, files from outside the prefix and what put them there, two NCCLs, plugins, and
artifact identity (judge/packages.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from test_gpu import facts

from envtool.judge import cuda as cuda_of
from envtool.judge import gpu, packages, runtime, verdict
from envtool.judge.findings import Kind
from envtool.models import Environment, Package
from envtool.protocol.documents import read_facts
from envtool.protocol.types import HostReport, Library, NodeFacts, Runtime
from envtool.report.labels import words
from envtool_node.runtime import cudnn_version, mapped, nccl_version

PREFIX = "/envs/ddp"
SP = f"{PREFIX}/lib/python3.9/site-packages"
LOCK = Environment(
    "conda-lock.yml",
    "lock",
    (
        Package("python", "3.9.18", "h0755675_1_cpython"),
        Package("pytorch", "2.1.2", "cuda118_py39h0a6d3b2_300"),
        Package("nccl", "2.19.3.1", "h6103f9b_0"),
        Package("cudnn", "8.9.7.29", "hcdd5f01_2"),
    ),
)


def rt(**kw: object) -> Runtime:
    base: dict[str, object] = dict(
        executable=f"{PREFIX}/bin/python",
        sys_prefix=PREFIX,
        real_prefix=PREFIX,
        path=(f"{PREFIX}/lib/python3.9", SP),
        torch_file=f"{SP}/torch/__init__.py",
        torch_entry=SP,
        libraries=(
            Library("nccl", f"{PREFIX}/lib/libnccl.so.2", "2.19.3"),
            Library("cudnn", f"{PREFIX}/lib/libcudnn.so.8", "8.9.7"),
        ),
    )
    base.update(kw)
    return Runtime(**base)  # type: ignore[arg-type]


def host(name: str = "n1", env: tuple[tuple[str, str], ...] = (), **kw: object) -> HostReport:
    f = facts(torch="2.1.2", nccl="2.19.3", cudnn="8907", env=env, runtime=rt(**kw))
    return HostReport(name, facts=f, prefix=PREFIX)


def kinds(report: HostReport) -> list[tuple[Kind, str, str]]:
    return [(f.kind, f.subject, f.cause) for f in runtime.check(report, LOCK)]


def test_the_locked_runtime_gives_no_finding() -> None:
    assert runtime.check(host(), LOCK) == []


@pytest.mark.parametrize(
    ("build", "manager", "version", "cuda"),
    [
        ("cuda118_py39h0a6d3b2_300", "conda", "2.1.2", "11.8"),
        ("cuda120_py311h1234567_301", "conda", "2.3.1", "12.0"),
        ("py3.9_cuda11.8_cudnn8.7.0_0", "conda", "2.1.2", "11.8"),
        ("cpu_py39h6b5f3f5_0", "conda", "2.1.0", "cpu"),
        ("", "pip", "2.3.1+cu121", "12.1"),
        ("", "pip", "2.3.1+cpu", "cpu"),
        ("", "pip", "2.3.1", None),
        ("py39_0", "conda", "2.1.2", None),
    ],
)
def test_the_cuda_build_a_torch_package_names(
    build: str, manager: str, version: str, cuda: str | None
) -> None:
    assert cuda_of.torch_build(Package("pytorch", version, build, manager=manager)) == cuda


def test_version_codes_decode_as_the_libraries_define_them() -> None:
    assert (cudnn_version(8907), cudnn_version(91900), cudnn_version(90100)) == (
        "8.9.7",
        "9.19.0",
        "9.1.0",
    )
    assert (nccl_version(21903), nccl_version(22809), nccl_version(2708)) == (
        "2.19.3",
        "2.28.9",
        "2.7.8",
    )


def test_the_h100_scenario_names_every_value_that_is_not_the_locked_one(
    shared_data: Path,
) -> None:
    """What the real H100 reported (python 3.12.3, torch 2.11.0+cu130, NCCL 2.28.9, cuDNN
    9.19.0) against a lock of python 3.9.18, pytorch 2.1.2 cuda118, nccl 2.19.3.1: the
    report that said "all good" now names each of them."""
    raw = json.loads((shared_data / "gpu" / "gpu-facts-h100.json").read_text())
    found = runtime.check(HostReport("h100", facts=read_facts(raw), prefix=PREFIX), LOCK)
    got = {f.subject: (f.expected, f.actual) for f in found if f.kind is Kind.RUNTIME_DIFFERS}
    assert got == {
        "python": ("3.9.18", "3.12.3"),
        "torch": ("2.1.2", "2.11.0+cu130"),
        "torch CUDA": ("11.8", "13.0"),
        "NCCL": ("2.19.3", "2.28.9"),
        "cuDNN": ("8.9.7", "9.19.0"),
    }
    text = words(next(f for f in found if f.subject == "python"))
    assert "3.9.18" in text.expected and "3.12.3" in text.actual and "envtool install" in text.fix


def test_torch_on_pythonpath_is_named_with_its_version_path_and_variable() -> None:
    other = "/home/me/src"
    report = host(
        env=(("PYTHONPATH", other),),
        torch_file=f"{other}/torch/__init__.py",
        torch_entry=other,
        path=(other, SP),
    )
    report = replace(report, facts=replace(report.facts, torch="1.13.1"))  # type: ignore[arg-type]
    (f,) = runtime.check(report, LOCK)  # the version differs *because* of it: one finding
    assert (f.kind, f.subject, f.cause) == (Kind.LOADED_OUTSIDE, "torch", runtime.PYTHONPATH)
    said = words(f)
    assert "1.13.1" in said.actual and other in said.actual and "PYTHONPATH" in said.actual
    assert said.fix.startswith("unset PYTHONPATH")


def test_torch_from_the_user_site_names_the_user_site() -> None:
    user = "/home/me/.local/lib/python3.9/site-packages"
    found = kinds(host(user_site=user, torch_file=f"{user}/torch/__init__.py", torch_entry=user))
    assert found == [(Kind.LOADED_OUTSIDE, "torch", runtime.USER_SITE)]
    report = host(user_site=user, torch_file=f"{user}/torch/x.py", torch_entry=user)
    (f,) = runtime.check(report, LOCK)
    assert "PYTHONNOUSERSITE=1" in words(f).fix and "pip uninstall --user torch" in words(f).fix


def test_a_python_of_another_environment_is_named() -> None:
    found = kinds(host(sys_prefix="/opt/venv", real_prefix="/opt/venv"))
    assert (Kind.LOADED_OUTSIDE, "python", runtime.INTERPRETER) in found


def test_nccl_through_ld_library_path_and_ld_preload() -> None:
    other = "/sw/nccl-2.16/lib/libnccl.so.2"
    libs = (Library("nccl", other, "2.16.5"), Library("cudnn", f"{PREFIX}/lib/libcudnn.so.8"))
    found = kinds(host(env=(("LD_LIBRARY_PATH", "/sw/nccl-2.16/lib:/usr/lib"),), libraries=libs))
    assert found == [(Kind.LOADED_OUTSIDE, "NCCL", runtime.LD_LIBRARY_PATH)]
    two = (Library("nccl", other, "2.16.5"), Library("nccl", f"{PREFIX}/lib/libnccl.so.2"))
    found = kinds(host(env=(("LD_PRELOAD", other),), libraries=two))
    assert (Kind.LOADED_OUTSIDE, "NCCL", runtime.LD_PRELOAD) in found
    assert (Kind.LOADED_TWICE, "NCCL", "") in found


def test_a_symlinked_prefix_is_still_inside() -> None:
    """/proc/self/maps shows real paths: /envs → /gpfs/envs is not "outside"."""
    lib = Library("nccl", "/gpfs/envs/ddp/lib/libnccl.so.2", "2.19.3")
    assert kinds(host(real_prefix="/gpfs/envs/ddp", libraries=(lib,))) == []


def test_libraries_beside_a_linked_torch_come_with_it() -> None:
    """The prefix's torch is a link into another site-packages (the test fixtures; conda's
    softlinks): the NCCL its RPATH finds beside it is its own; one from /usr/lib is not."""
    real = "/opt/venv/lib/python3.12/site-packages"
    wheel = Library("nccl", f"{real}/nvidia/nccl/lib/libnccl.so.2", "2.19.3")
    report = host(torch_real_file=f"{real}/torch/__init__.py", libraries=(wheel,))
    assert kinds(report) == []
    system = Library("nccl", "/usr/lib/x86_64-linux-gnu/libnccl.so.2", "2.19.3")
    report = host(torch_real_file=f"{real}/torch/__init__.py", libraries=(system,))
    assert kinds(report) == [(Kind.LOADED_OUTSIDE, "NCCL", runtime.LOADER)]


def test_a_cpu_torch_is_not_held_to_the_locked_nccl() -> None:
    cpu_lock = replace(LOCK, packages=(*LOCK.packages[:1], Package("pytorch", "2.1.2", "cpu_0")))
    f = facts(torch="2.1.2", cuda=None, nccl=None, cudnn=None, runtime=rt(libraries=()))
    assert runtime.check(HostReport("n", facts=f, prefix=PREFIX), cpu_lock) == []
    assert [x.subject for x in runtime.check(HostReport("n", facts=f, prefix=PREFIX), LOCK)] == [
        "torch CUDA"
    ]


def test_the_mapped_libraries_of_a_real_h100_process(shared_data: Path) -> None:
    text = (shared_data / "gpu" / "proc-self-maps-h100-after-nccl-init.txt").read_text()
    found = dict(mapped(text))
    base = "/opt/torch/.venv/lib/python3.12/site-packages/nvidia"
    assert found["nccl"] == f"{base}/nccl/lib/libnccl.so.2"
    assert found["cudart"] == f"{base}/cu13/lib/libcudart.so.13"
    assert found["cudnn"] == f"{base}/cudnn/lib/libcudnn.so.9"
    assert [k for k, _ in mapped(text)].count("nccl") == 1  # each file once


def test_a_net_plugin_on_some_nodes_only_is_named() -> None:
    plugin = ("/opt/aws-ofi-nccl/lib/libnccl-net.so",)
    rs = [host(f"n{i}", net_plugins=plugin if i < 4 else ()) for i in range(1, 5)]
    found = verdict.decide(rs, LOCK, verdict.Policy(gpu.GpuPolicy(min_gpus=8)))
    (f,) = [f for f in found if f.subject == "NCCL net plugin"]
    assert f.hosts == ("n4",) and f.expected == "libnccl-net.so"


def test_an_artifact_with_the_lock_name_but_another_hash_is_its_own_finding() -> None:
    locked = Package("numpy", "1.26.4", "py39_0", sha256="a" * 64, md5="1" * 32)
    rebuilt = replace(locked, sha256="b" * 64)
    (f,) = packages.diff(_env(locked), _env(rebuilt))
    assert f.kind is Kind.ARTIFACT_DIFFERS and f.found is not None
    assert f.found.sha256 == "b" * 64 and "sha256 bbbb" in words(f).actual
    md5_only = replace(locked, sha256="", md5="2" * 32)
    assert [x.kind for x in packages.diff(_env(locked), _env(md5_only))] == [Kind.ARTIFACT_DIFFERS]
    no_hash = replace(locked, sha256="", md5="")  # nothing to compare: not a finding
    assert packages.diff(_env(locked), _env(no_hash)) == []


def _env(*pkgs: Package) -> Environment:
    return Environment("x", "probe", pkgs)


def test_a_runtime_value_that_was_not_loaded_reads_not_loaded() -> None:
    """torch could not be imported: "not loaded", never "(not loaded) loaded"."""
    from envtool.judge import runtime
    from envtool.report.labels import words

    lock = Environment("l", "lock", (Package("pytorch", "2.4.0", "cuda118_py39_0"),))
    found = runtime.against_lock(NodeFacts(python="3.9.18", torch=None), lock)
    torch = [f for f in found if f.subject == "torch"]
    assert torch and words(torch[0]).actual == "not loaded"
