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
from envtool.protocol.facts_fields import read_facts
from envtool.protocol.types import HostReport, Library, NetPlugin, NodeFacts, Runtime
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
    kinds_seen = [k for k, _ in mapped(text)]
    assert kinds_seen.count("libtorch") == 6 and kinds_seen.count("libc10") == 2
    assert found["cublas"] == f"{base}/cu13/lib/libcublas.so.13"
    assert found["cublaslt"] == f"{base}/cu13/lib/libcublasLt.so.13"
    # that venv's own process, judged against its own prefix: nothing from outside, no twice
    venv, site = "/opt/torch/.venv", "/opt/torch/.venv/lib/python3.12/site-packages"
    libs = tuple(Library(kind, path) for kind, path in mapped(text))
    own = Runtime(sys_prefix=venv, real_prefix=venv, torch_file=f"{site}/torch/__init__.py",
                  torch_real_file=f"{site}/torch/__init__.py", libraries=libs)  # fmt: skip
    assert runtime.outside_prefix(facts(runtime=own), venv) == []


def test_a_net_plugin_on_some_nodes_only_is_named() -> None:
    plugin = (NetPlugin("/opt/aws-ofi-nccl/lib/libnccl-net.so", "ld.so.cache"),)
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


# issue 24 item 2: every library a locked package ships, or one shadowing it
TORCH_LIB = f"{SP}/torch/lib"
OWN = (
    Library("libtorch", f"{TORCH_LIB}/libtorch_cpu.so"),
    Library("libc10", f"{TORCH_LIB}/libc10.so"),
    Library("nccl", f"{PREFIX}/lib/libnccl.so.2", "2.19.3"),
    Library("cudnn", f"{PREFIX}/lib/libcudnn.so.8", "8.9.7"),
    Library("cudnn-part", f"{PREFIX}/lib/libcudnn_ops_infer.so.8", "8.9.7"),
    Library("cudnn-part", f"{PREFIX}/lib/libcudnn_cnn_infer.so.8.9.7"),
    Library("cublas", f"{PREFIX}/lib/libcublas.so.11", "11.11.3"),
    Library("cublaslt", f"{PREFIX}/lib/libcublasLt.so.11", "11.11.3"),
)
CUBLAS_LOCK = replace(LOCK, packages=(*LOCK.packages, Package("libcublas", "11.11.3.6", "0")))


def test_the_prefix_own_libraries_of_every_kind_give_no_finding() -> None:
    """libtorch, libc10, NCCL, cuDNN and its parts (one folder, one version: a part's file
    name ``.so.8.9.7`` says as much as its own report), cuBLAS and cuBLASLt (one name
    each, not "twice")."""
    assert runtime.check(host(libraries=OWN), CUBLAS_LOCK) == []


def _with(*libs: Library, skip: str = "") -> tuple[Library, ...]:
    return tuple(lib for lib in OWN if skip not in lib.path or not skip) + libs


@pytest.mark.parametrize(
    ("name", "kind", "subject"),
    [
        ("libtorch_cpu.so", "libtorch", "libtorch"),
        ("libc10.so", "libc10", "libc10"),
        ("libcublas.so.11", "cublas", "cuBLAS"),
        ("libcudnn_ops_infer.so.8", "cudnn-part", "cuDNN"),
    ],
)
def test_each_library_from_ld_library_path_is_named_with_its_cause(
    name: str, kind: str, subject: str
) -> None:
    """A libtorch C++ distribution, another toolkit's cuBLAS, another cuDNN's part: the file
    torch would have loaded from the prefix is shadowed (LD_LIBRARY_PATH beats RUNPATH)."""
    other = Library(kind, f"/opt/other/lib/{name}", "11.8.0" if kind == "cublas" else None)
    env = (("LD_LIBRARY_PATH", "/opt/other/lib"),)
    report = host(env=env, libraries=_with(other, skip=f"/{name}"))
    found = runtime.check(report, CUBLAS_LOCK)
    assert [(f.kind, f.subject, f.cause) for f in found] == [
        (Kind.LOADED_OUTSIDE, subject, runtime.LD_LIBRARY_PATH)
    ]  # one cause, one finding: not also runtime-differs or "parts from two installs"
    assert f"{name}" in found[0].actual and "/opt/other/lib" in found[0].actual
    assert found[0].reference is not None  # the locked package it shadows


def test_torch_from_elsewhere_explains_the_libtorch_beside_it() -> None:
    """torch on PYTHONPATH maps its own libtorch/libc10: one finding (torch); a libc10 from
    LD_LIBRARY_PATH besides is another cause, its own finding."""
    other = "/home/me/libtorch-src"
    beside = (
        Library("libtorch", f"{other}/torch/lib/libtorch_cpu.so"),
        Library("libc10", f"{other}/torch/lib/libc10.so"),
    )
    torch = f"{other}/torch/__init__.py"
    report = host("n1", (("PYTHONPATH", other),), libraries=beside, torch_file=torch,
                  torch_entry=other)  # fmt: skip
    assert kinds(report) == [(Kind.LOADED_OUTSIDE, "torch", runtime.PYTHONPATH)]
    shadow = (beside[0], Library("libc10", "/opt/libtorch/lib/libc10.so"))
    env = (("PYTHONPATH", other), ("LD_LIBRARY_PATH", "/opt/libtorch/lib"))
    assert kinds(host("n1", env, libraries=shadow, torch_file=torch, torch_entry=other)) == [
        (Kind.LOADED_OUTSIDE, "torch", runtime.PYTHONPATH),
        (Kind.LOADED_OUTSIDE, "libc10", runtime.LD_LIBRARY_PATH),
    ]


def test_cudnn_parts_from_another_install_are_one_finding() -> None:
    """The main libcudnn from the prefix, a part from the pip wheel's folder (inside: torch's
    site-packages) or of another version in the same folder: named once, with both files."""
    wheel = Library("cudnn-part", f"{SP}/nvidia/cudnn/lib/libcudnn_ops_infer.so.8", "8.9.2")
    (f,) = runtime.check(host(libraries=_with(wheel, skip="/libcudnn_ops")), LOCK)
    assert (f.kind, f.subject, f.cause) == (Kind.LOADED_TWICE, "cuDNN", runtime.PARTS)
    assert "libcudnn.so.8 8.9.7 at /envs/ddp/lib" in f.actual and "nvidia/cudnn/lib" in f.actual
    older = Library("cudnn-part", f"{PREFIX}/lib/libcudnn_adv_infer.so.8.6.0")
    (f,) = runtime.check(host(libraries=_with(older)), LOCK)
    assert f.cause == runtime.PARTS and "libcudnn_adv_infer.so.8.6.0" in f.actual
    assert "libcudnn_ops_infer" not in f.actual  # the parts that agree are not named
    from envtool.report.labels import words

    said = words(f)  # the fix speaks of two installs, not of LD_PRELOAD
    assert said.fix.startswith("one cuDNN install per environment") and "LD_PRELOAD" not in said.fix
    both = kinds(host(libraries=_with(wheel)))  # the same part twice: that finding says it
    assert both == [(Kind.LOADED_TWICE, "cuDNN", "")]


def test_a_cudnn_from_outside_is_not_also_parts_from_two_installs() -> None:
    """The main libcudnn from LD_LIBRARY_PATH with the prefix's parts: its finding says it."""
    main = Library("cudnn", "/sw/cudnn-9/lib/libcudnn.so.8", "8.9.7")
    env = (("LD_LIBRARY_PATH", "/sw/cudnn-9/lib"),)
    found = kinds(host(env=env, libraries=(*_with(skip="/libcudnn.so"), main)))
    assert found == [(Kind.LOADED_OUTSIDE, "cuDNN", runtime.LD_LIBRARY_PATH)]


def test_softlinked_parts_from_several_cache_folders_are_the_prefix_own() -> None:
    """conda's always_softlink with cuDNN split in packages: maps shows each package's cache
    folder; the prefix's links (linked_from) are in one folder, inside: no finding."""
    cache = "/opt/conda/pkgs"
    libs = (
        Library("cudnn", f"{cache}/libcudnn-8.9.7/lib/libcudnn.so.8.9.7", "8.9.7",
                f"{PREFIX}/lib/libcudnn.so.8.9.7"),
        Library("cudnn-part", f"{cache}/libcudnn-ops-8.9.7/lib/libcudnn_ops_infer.so.8.9.7",
                None, f"{PREFIX}/lib/libcudnn_ops_infer.so.8.9.7"),
        Library("libc10", f"{cache}/pytorch-2.1.2/lib/libc10.so", None, f"{TORCH_LIB}/libc10.so"),
        Library("cublas", f"{cache}/libcublas-11/lib/libcublas.so.11", "11.11.3",
                f"{PREFIX}/lib/libcublas.so.11"),
    )  # fmt: skip
    assert kinds(host(libraries=libs)) == []
    unlinked = (*libs[:1], replace(libs[1], linked_from=None))  # the same file, not linked
    assert kinds(host(libraries=unlinked)) == [(Kind.LOADED_OUTSIDE, "cuDNN", runtime.LOADER)]


def test_any_of_the_libraries_mapped_twice_is_named() -> None:
    """Two libc10 (a preloaded one beside torch's), two cuDNN majors: one finding each;
    libcublas and libcublasLt are two libraries, not one twice."""
    preloaded = Library("libc10", "/opt/libtorch/lib/libc10.so")
    cudnn9 = Library("cudnn", f"{PREFIX}/lib/libcudnn.so.9", "9.1.0")
    env = (("LD_PRELOAD", preloaded.path),)
    found = kinds(host(env=env, libraries=(*OWN, preloaded, cudnn9)))
    assert (Kind.LOADED_OUTSIDE, "libc10", runtime.LD_PRELOAD) in found
    assert (Kind.LOADED_TWICE, "libc10", "") in found
    assert (Kind.LOADED_TWICE, "cuDNN", "") in found
    assert [k for k, s, _ in found if s == "cuBLAS"] == []


def test_a_cublas_that_is_not_the_locked_one_differs() -> None:
    """cuBLAS from inside the prefix but of another version than the locked ``libcublas``;
    not mapped (it loads on first use) says nothing."""
    libs = _with(Library("cublas", f"{PREFIX}/lib/libcublas.so.11", "11.8.0"), skip="libcublas")
    found = runtime.check(host(libraries=libs), CUBLAS_LOCK)
    assert [(f.kind, f.subject, f.expected, f.actual) for f in found] == [
        (Kind.RUNTIME_DIFFERS, "cuBLAS", "11.11.3", "11.8.0")
    ]
    assert runtime.check(host(libraries=_with(skip="libcublas")), CUBLAS_LOCK) == []


def test_the_plugin_value_compared_across_nodes_is_where_independent() -> None:
    """Each entry says where it was found; the value compared is the plugin names only (the
    same plugin in /opt on one node and in the ld.so cache on another is the same)."""
    a = host("a", net_plugins=(NetPlugin("/opt/ofi/lib/libnccl-net.so", "LD_LIBRARY_PATH"),))
    b = host("b", net_plugins=(NetPlugin("/usr/lib64/libnccl-net.so", "ld.so.cache"),))
    assert a.facts is not None and b.facts is not None
    assert runtime.plugins(a.facts) == runtime.plugins(b.facts) == "libnccl-net.so"
