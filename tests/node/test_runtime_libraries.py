"""Issue 24 item 2 on real processes: the facts probe reports every library a locked package
ships, or one shadowing it (this torch's own libc10 copied elsewhere; cuDNN and cuBLAS
stand-ins built with ``cc -shared`` that answer their version functions), the judge names
each with what put it there, and NCCL net plugins are found where NCCL's ``dlopen`` looks
(LD_LIBRARY_PATH, libnccl's folder, PREFIX/lib, the ld.so cache, the system folders).

The stand-ins that remain, and why: cuDNN and cuBLAS, because their real wheels
(nvidia-cudnn-cu11, nvidia-cublas-cu11) are hundreds of MB each, too much for the test extras,
and the tests need three cuDNN parts of two versions, which one real install does not have;
the net plugins, because no NCCL net plugin ships on PyPI and the search only needs files
where NCCL's dlopen looks. NCCL and the CUDA runtime are NVIDIA's own (test_runtime_probe)."""

from __future__ import annotations

import importlib.metadata as md
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import require, which_or_skip
from fixtures.runtime import SP, stand_in

from envtool.cluster import local
from envtool.judge import runtime
from envtool.judge.findings import Finding, Kind
from envtool.protocol.types import HostReport, Library, NetPlugin, NodeFacts
from envtool.report.labels import words
from envtool_node import netplugins

CUDNN = "#include <stddef.h>\nsize_t cudnnGetVersion(void) {{ return {code}; }}\n"
CUBLAS = (
    "static const int v[] = {{{0}, {1}, {2}}};\n"
    "int cublasGetProperty(int type, int *value) {{\n"
    "  if (type < 0 || type > 2) return 7;\n  *value = v[type];\n  return 0;\n}}\n"
)
NO_VERSION = "int a_part_of_cudnn;\n"  # its version function lives in another part


@pytest.fixture
def cc() -> str:
    return which_or_skip("cc")


def _judged(facts: NodeFacts, prefix: Path) -> list[Finding]:
    return runtime.check(HostReport("here", facts=facts, prefix=str(prefix)), None)


def test_a_libc10_on_ld_library_path_is_named(
    runtime_prefix: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A libtorch C++ distribution on LD_LIBRARY_PATH (here: this torch's own libc10.so,
    copied): torch's RUNPATH loses to LD_LIBRARY_PATH, the process maps the copy, and the
    report names it instead of saying "all good"."""
    own = Path(str(md.distribution("torch").locate_file("torch/lib/libc10.so")))
    require(own.is_file(), f"{own} is absent")
    copy = tmp_path / "libtorch" / "lib" / "libc10.so"
    copy.parent.mkdir(parents=True)
    shutil.copy2(own, copy)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(copy.parent))
    _, facts = local.facts(runtime_prefix)
    assert facts.runtime is not None
    assert [lib.path for lib in facts.runtime.mapped("libc10")] == [str(copy)]
    names = {os.path.basename(lib.path) for lib in facts.runtime.mapped("libtorch")}
    assert {"libtorch.so", "libtorch_cpu.so", "libtorch_python.so"} <= names  # torch's own
    found = _judged(facts, runtime_prefix)
    assert [(f.kind, f.subject, f.cause) for f in found] == [
        (Kind.LOADED_OUTSIDE, "libc10", runtime.LD_LIBRARY_PATH)
    ]
    assert f"libc10.so at {copy.parent}" in found[0].actual
    assert "LD_LIBRARY_PATH" in words(found[0]).fix


def test_another_toolkits_cudnn_part_and_cublas_are_read_and_named(
    cc: str, runtime_prefix: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cuDNN part and a cuBLAS of another install, preloaded: each is mapped, says its own
    version (cudnnGetVersion; cublasGetProperty 0/1/2) and is named with LD_PRELOAD."""
    other = tmp_path / "cuda-11.8" / "lib64"
    ops = stand_in(cc, other / "libcudnn_ops.so.9", CUDNN.format(code=90100))
    blas = stand_in(cc, other / "libcublas.so.11", CUBLAS.format(11, 11, 3))
    monkeypatch.setenv("LD_PRELOAD", f"{ops} {blas}")
    _, facts = local.facts(runtime_prefix)
    assert facts.runtime is not None
    assert facts.runtime.mapped("cudnn-part") == (Library("cudnn-part", str(ops), "9.1.0"),)
    assert facts.runtime.mapped("cublas") == (Library("cublas", str(blas), "11.11.3"),)
    found = {f.subject: f for f in _judged(facts, runtime_prefix)}
    assert sorted((f.kind, s, f.cause) for s, f in found.items()) == [
        (Kind.LOADED_OUTSIDE, "cuBLAS", runtime.LD_PRELOAD),
        (Kind.LOADED_OUTSIDE, "cuDNN", runtime.LD_PRELOAD),
    ]  # /proc/self/maps lists by address: in either order
    assert f"libcudnn_ops.so.9 9.1.0 at {other}" in found["cuDNN"].actual
    assert f"libcublas.so.11 11.11.3 at {other}" in found["cuBLAS"].actual


def test_cudnn_parts_of_two_installs_in_one_prefix_are_one_finding(
    cc: str, runtime_prefix: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """conda's cuDNN in PREFIX/lib and a pip wheel's part in site-packages/nvidia: both
    inside the prefix, yet two installs: one finding naming the odd part. A part whose
    version function is its dependency's (cuDNN 9's libcudnn_graph) reports none, never the
    dependency's."""
    lib = runtime_prefix / "lib"
    main = stand_in(cc, lib / "libcudnn.so.9", CUDNN.format(code=90100))
    graph = stand_in(cc, lib / "libcudnn_graph.so.9", CUDNN.format(code=90100))
    adv = stand_in(cc, lib / "libcudnn_adv.so.9", NO_VERSION, graph)
    wheel = runtime_prefix / SP / "nvidia" / "cudnn" / "lib" / "libcudnn_ops.so.9"
    stand_in(cc, wheel, CUDNN.format(code=90000))
    monkeypatch.setenv("LD_PRELOAD", f"{main} {adv} {wheel}")
    _, facts = local.facts(runtime_prefix)
    assert facts.runtime is not None
    versions = {os.path.basename(x.path): x.version for x in facts.runtime.libraries}
    assert versions["libcudnn.so.9"] == versions["libcudnn_graph.so.9"] == "9.1.0"
    assert versions["libcudnn_adv.so.9"] is None  # dlsym would have found the graph's
    assert versions["libcudnn_ops.so.9"] == "9.0.0"
    (f,) = _judged(facts, runtime_prefix)
    assert (f.kind, f.subject, f.cause) == (Kind.LOADED_TWICE, "cuDNN", runtime.PARTS)
    assert f"libcudnn_ops.so.9 9.0.0 at {wheel.parent}" in f.actual
    assert "libcudnn_adv" not in f.actual and "libcudnn_graph" not in f.actual


def test_a_net_plugin_in_the_prefix_lib_is_found_and_named(runtime_prefix: Path) -> None:
    """PREFIX/lib is where a conda libnccl's RUNPATH ($ORIGIN) makes NCCL find its plugin;
    only LD_LIBRARY_PATH was searched before."""
    plugin = runtime_prefix / "lib" / "libnccl-net.so"
    plugin.write_bytes(b"")
    _, facts = local.facts(runtime_prefix)
    assert facts.runtime is not None
    assert NetPlugin(str(plugin), "PREFIX/lib") in facts.runtime.net_plugins
    assert runtime.plugins(facts) == "libnccl-net.so"


def _ld_cache(tmp_path: Path, *folders: Path) -> Path:
    """A real ld.so cache of ``folders`` (and the system's), written by ldconfig."""
    found = shutil.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(p)), None
    )
    require(found is not None, "ldconfig is not installed")
    assert found is not None
    conf, cache = tmp_path / "ld.so.conf", tmp_path / "ld.so.cache"
    conf.write_text("".join(f"{f}\n" for f in folders))
    subprocess.run([found, "-X", "-C", str(cache), "-f", str(conf)], check=True, timeout=60)
    return cache


def test_plugins_are_found_where_nccl_dlopen_looks_each_once(cc: str, tmp_path: Path) -> None:
    """In dlopen's order: LD_LIBRARY_PATH, libnccl's own folder (RUNPATH $ORIGIN),
    PREFIX/lib, the ld.so cache (parsed from its bytes), each file once (a cached file
    already found on LD_LIBRARY_PATH keeps that source)."""
    on_path = stand_in(cc, tmp_path / "ofi" / "lib" / "libnccl-net.so", NO_VERSION)
    beside = tmp_path / "nccl" / "lib"
    stand_in(cc, beside / "libnccl-net-ofi.so", NO_VERSION)
    prefix = tmp_path / "prefix"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "libnccl-net.so").write_bytes(b"")
    cached = stand_in(cc, tmp_path / "system" / "lib" / "libnccl-net-ib.so", NO_VERSION)
    cache = _ld_cache(tmp_path, cached.parent, on_path.parent)
    listed = netplugins.cached_plugins(cache.read_bytes())
    assert sorted(listed) == sorted([str(on_path), str(cached)])
    env = {"LD_LIBRARY_PATH": f"relative/lib::{on_path.parent}"}
    found = netplugins.search(env, [str(beside / "libnccl.so.2")], str(prefix), str(cache))
    assert found[:4] == [
        {"path": str(on_path), "found": "LD_LIBRARY_PATH"},
        {"path": str(beside / "libnccl-net-ofi.so"), "found": "RUNPATH"},
        {"path": str(prefix / "lib" / "libnccl-net.so"), "found": "PREFIX/lib"},
        {"path": str(cached), "found": "ld.so.cache"},
    ]
    assert [x["path"] for x in found].count(str(on_path)) == 1


def test_the_plugin_search_is_bounded(tmp_path: Path) -> None:
    """Many plugin files, and bytes that are no ld.so cache: at most MAX_PLUGINS entries,
    nothing read from a file without the cache's magic."""
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(3 * netplugins.MAX_PLUGINS):
        (folder / f"libnccl-net-{i:03d}.so").write_bytes(b"")
    junk = tmp_path / "junk"
    junk.write_bytes(b"\0".join([str(folder / "libnccl-net.so").encode()] * 100))
    found = netplugins.search({"LD_LIBRARY_PATH": str(folder)}, [], str(tmp_path), str(junk))
    assert len(found) == netplugins.MAX_PLUGINS
    assert netplugins.cached_plugins(junk.read_bytes()) == []
