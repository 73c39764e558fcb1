"""The runtime part of the probe on real processes: a prefix whose python and torch are the
locked ones, torch from a user site, NCCL net plugins on the library path, and the real CUDA
libraries the test extras install (pyproject.toml): NVIDIA's libnccl.so.2 2.19.3
(nvidia-nccl-cu11) preloaded from another folder and mapped from a softlinked prefix's
package cache, and NVIDIA's libcudart.so.11.0 11.8 (nvidia-cuda-runtime-cu11) preloaded.
Each is the wheel's file, hard-linked where a test needs it elsewhere (never a copy of the
176 MB NCCL, unless the two folders are on different file systems).

One stand-in remains, and why: a libcudart built here with cc that answers
cudaRuntimeGetVersion, because the real one answers it only where a driver is installed (here
and in CI it returns 35, cudaErrorInsufficientDriver, as it does to cudaGetDeviceCount): the
test of the real one checks the probe reports what the real library answers, either way."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from conftest import Project, require
from fixtures import runtime as wheels
from fixtures.prefixes import add_dist_info
from fixtures.runtime import SHORT, SP, other_torch, stand_in

from envtool import environments
from envtool.cluster import local
from envtool.judge import packages, runtime
from envtool.judge.findings import Kind
from envtool.lock import lockfile
from envtool.models import Environment, Package
from envtool.protocol.types import HostReport, NetPlugin, NodeFacts
from envtool.report.labels import words
from envtool_node.runtime import cudart_version

CUDART = "int cudaRuntimeGetVersion(int *version) { *version = 11080; return 0; }\n"
# what the real libcudart answers, asked in a process of its own (no CUDA state in pytest's)
ASK_CUDART = """
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
lib.cudaGetErrorName.restype = ctypes.c_char_p
out = {}
for name in ("cudaRuntimeGetVersion", "cudaGetDeviceCount"):
    value = ctypes.c_int(-1)
    code = getattr(lib, name)(ctypes.byref(value))
    out[name] = [code, value.value, lib.cudaGetErrorName(code).decode()]
try:
    ctypes.CDLL("libcuda.so.1")
    out["driver"] = True
except OSError:
    out["driver"] = False
print(json.dumps(out))
"""


def _real(wheel: tuple[str, str]) -> Path:
    found = wheels.wheel_library(*wheel)
    require(found is not None, f"{wheel[0]} is not installed (pip install -e '.[test]')")
    assert found is not None
    return found


def _elsewhere(wheel: tuple[str, str], tmp_path: Path) -> Path:
    """The real library hard-linked into ``tmp_path/other``: the wheel's own folder is in the
    test interpreter's site-packages, which the prefix's torch links into (so its files count
    as the prefix's own)."""
    real = _real(wheel)
    return wheels.hard_link(real, tmp_path / "other" / real.name)


def _versions(facts: NodeFacts, library: Path) -> list[str | None]:
    """The versions the probe read from ``library``: a CUDA torch maps its own libcudart too
    (another soname), and that one is library-loaded-twice's, not these tests'."""
    assert facts.runtime is not None
    return [lib.version for lib in facts.runtime.mapped("cudart") if lib.path == str(library)]


@cache
def _cudart_answers(library: Path) -> dict:
    argv = [sys.executable, "-c", ASK_CUDART, str(library)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
    answers: dict = json.loads(out.stdout)
    return answers


def _check(facts: NodeFacts, prefix: Path, project: Project | None = None) -> list:
    lock = None
    if project is not None:
        data = lockfile.read(project.lock)
        lock = environments.from_lock(data, "lock", "linux-64")
    return runtime.check(HostReport("here", facts=facts, prefix=str(prefix)), lock)


def test_the_locked_prefix_loads_what_is_locked(runtime_prefix: Path, project: Project) -> None:
    _, facts = local.facts(runtime_prefix)
    rt = facts.runtime
    assert rt is not None and rt.sys_prefix == str(runtime_prefix)
    assert rt.executable == str(runtime_prefix / "bin" / "python")
    assert rt.torch_file == f"{runtime_prefix}/lib/python{SHORT}/site-packages/torch/__init__.py"
    assert not any("envtool" in p for p in rt.path)  # envtool's own folder is not the node's
    assert _check(facts, runtime_prefix, project) == []


def test_torch_in_a_user_site_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A python whose user site is on (a conda python, or any non-venv one) with another
    torch in ``~/.local``: found there, named with its version and the user-site fix."""
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    prefix = tmp_path / "plain"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(base)
    user = tmp_path / "home" / ".local"
    site = other_torch(user / "lib" / f"python{SHORT}" / "site-packages", "2.0.1") / "torch"
    monkeypatch.setenv("PYTHONUSERBASE", str(user))
    monkeypatch.delenv("PYTHONNOUSERSITE", raising=False)
    _, facts = local.facts(prefix)
    assert facts.runtime is not None and facts.runtime.user_site == str(site.parent)
    found = {f.subject: f for f in _check(facts, prefix)}
    assert found["python"].cause == runtime.INTERPRETER  # a symlink to another python
    torch = found["torch"]
    assert (torch.kind, torch.cause) == (Kind.LOADED_OUTSIDE, runtime.USER_SITE)
    said = words(torch)
    assert "torch 2.0.1" in said.actual and str(site) in said.actual
    assert "PYTHONNOUSERSITE=1" in said.fix


def test_a_preloaded_nccl_is_mapped_read_and_named(
    runtime_prefix: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NVIDIA's libnccl.so.2, preloaded from another folder: /proc/self/maps shows it, its
    own ncclGetVersion says 2.19.3, and the finding names LD_PRELOAD."""
    library = _elsewhere(wheels.NCCL_WHEEL, tmp_path)
    monkeypatch.setenv("LD_PRELOAD", str(library))
    _, facts = local.facts(runtime_prefix)
    assert facts.runtime is not None
    (nccl,) = facts.runtime.mapped("nccl")
    assert (nccl.path, nccl.version) == (str(library), "2.19.3")
    found = _check(facts, runtime_prefix)
    assert [(f.kind, f.subject, f.cause) for f in found] == [
        (Kind.LOADED_OUTSIDE, "NCCL", runtime.LD_PRELOAD)
    ]
    assert "libnccl.so.2 2.19.3" in found[0].actual and "unset LD_PRELOAD" in words(found[0]).fix


def test_a_softlinked_prefix_maps_its_own_nccl_from_the_package_cache(
    runtime_prefix: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """conda's always_softlink: the prefix's lib/libnccl.so.2 is a link into the package
    cache (here the real NCCL, hard-linked there), so /proc/self/maps shows the cache's path.
    That file is the prefix's own: no loaded-outside-prefix (the probe names the link)."""
    real = _real(wheels.NCCL_WHEEL)
    cached = wheels.hard_link(real, tmp_path / "pkgs" / "nccl-2.19.3.1-h0" / "lib" / "libnccl.so.2")
    own = runtime_prefix / "lib" / "libnccl.so.2"
    own.symlink_to(cached)
    monkeypatch.setenv("LD_PRELOAD", str(own))  # what torch's RUNPATH would load, in place
    _, facts = local.facts(runtime_prefix)
    assert facts.runtime is not None
    (nccl,) = facts.runtime.mapped("nccl")
    assert (nccl.path, nccl.linked_from, nccl.version) == (str(cached), str(own), "2.19.3")
    assert _check(facts, runtime_prefix) == []


def test_the_real_cudart_answers_35_without_a_driver() -> None:
    """libcudart 11.8 on a machine without libcuda.so.1 (this one, CI): every call, even the
    runtime's own version, is cudaErrorInsufficientDriver, the real answer of a node without
    a driver; with a driver it counts the devices and says 11080."""
    answers = _cudart_answers(_real(wheels.CUDART_WHEEL))
    if not answers["driver"]:
        no_driver = [35, -1, "cudaErrorInsufficientDriver"]
        assert answers["cudaGetDeviceCount"] == answers["cudaRuntimeGetVersion"] == no_driver
    else:
        assert answers["cudaRuntimeGetVersion"][:2] == [0, 11080]
        assert answers["cudaGetDeviceCount"][0] in (0, 100)  # 100: cudaErrorNoDevice


def test_a_preloaded_cudart_is_mapped_with_what_it_answers(
    runtime_prefix: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NVIDIA's libcudart.so.11.0, preloaded from another folder: mapped, named with
    LD_PRELOAD, and its version is the library's own answer: 11.8 where a driver is
    installed, none where not (35)."""
    library = _elsewhere(wheels.CUDART_WHEEL, tmp_path)
    code, value, _ = _cudart_answers(library)["cudaRuntimeGetVersion"]
    monkeypatch.setenv("LD_PRELOAD", str(library))
    _, facts = local.facts(runtime_prefix)
    assert facts.runtime is not None
    expected = cudart_version(value) if code == 0 else None
    assert _versions(facts, library) == [expected]
    found = [f for f in _check(facts, runtime_prefix) if f.kind is Kind.LOADED_OUTSIDE]
    assert [(f.subject, f.cause) for f in found] == [("CUDA runtime", runtime.LD_PRELOAD)]
    assert f"libcudart.so.11.0 at {library.parent}" in (found[0].actual or "")


def test_a_cudart_that_answers_its_version_is_read(
    runtime_prefix: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the real libcudart says only with a driver (a stand-in): cudaRuntimeGetVersion's
    11080 is 11.8."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    require(compiler is not None, "no C compiler (apt-get install gcc libc6-dev)")
    assert compiler is not None
    library = stand_in(compiler, tmp_path / "cuda-11.8" / "lib64" / "libcudart.so.11.0", CUDART)
    monkeypatch.setenv("LD_PRELOAD", str(library))
    _, facts = local.facts(runtime_prefix)
    assert facts.runtime is not None
    assert _versions(facts, library) == ["11.8"]


def test_net_plugins_on_the_library_path_are_listed(
    runtime_prefix: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugins = tmp_path / "aws-ofi-nccl" / "lib"
    plugins.mkdir(parents=True)
    (plugins / "libnccl-net.so").write_bytes(b"")
    (plugins / "libother.so").write_bytes(b"")
    monkeypatch.setenv("LD_LIBRARY_PATH", f"/nonexistent:{plugins}")
    monkeypatch.setenv("NCCL_NET_PLUGIN", "aws-ofi")
    _, facts = local.facts(runtime_prefix)
    assert facts.runtime is not None
    assert facts.runtime.net_plugins[0] == NetPlugin(
        str(plugins / "libnccl-net.so"), "LD_LIBRARY_PATH"
    )  # first: NCCL's dlopen searches LD_LIBRARY_PATH before anything else
    assert runtime.plugins(facts) == "libnccl-net.so, NCCL_NET_PLUGIN=aws-ofi"


def test_verify_names_a_record_whose_artifact_is_not_the_locked_one(
    runtime_prefix: Path, project: Project
) -> None:
    def verify() -> tuple[int, dict]:
        code, out, _ = project.run(
            "verify", "--transport", "local", "--hosts", "localhost", "--prefix",
            str(runtime_prefix), "--min-gpus", "0", "--format", "json",
        )  # fmt: skip
        return code, json.loads(out)

    code, doc = verify()
    assert code == 0 and doc["ok"] is True, doc["findings"]
    (record,) = (runtime_prefix / "conda-meta").glob("numpy-*.json")
    meta = json.loads(record.read_text())
    meta["sha256"] = "f" * 64  # the same name-version-build, another file
    record.write_text(json.dumps(meta))
    code, doc = verify()
    assert code == 1
    (f,) = [f for f in doc["findings"] if f["severity"] == "error"]
    assert (f["kind"], f["subject"]) == ("artifact-differs", "numpy")
    assert "sha256 ffffffffffff" in f["actual"] and meta["version"] in f["expected"]


def test_a_pip_wheel_is_compared_by_the_hash_pip_recorded(runtime_prefix: Path) -> None:
    """pip writes the wheel's sha256 into direct_url.json (PEP 610) for a ``name @ URL``
    install, as ``envtool install`` does: the export carries it, and another file with the
    lock's name and version is ``artifact-differs``; an index install records no hash and is
    not compared."""
    info = add_dist_info(runtime_prefix, "tiny-dist", "1.0", sp=SP)
    wheel = "https://files.example/tiny_dist-1.0-py3-none-any.whl"
    digest = "ab" * 32
    direct = {"url": wheel, "archive_info": {"hashes": {"sha256": digest}}}
    (info / "direct_url.json").write_text(json.dumps(direct))
    env = environments.from_prefix(runtime_prefix)
    (pip,) = [p for p in env.packages if p.manager == "pip"]
    assert (pip.name, pip.sha256, pip.url) == ("tiny-dist", digest, wheel)
    locked = Package("tiny-dist", "1.0", manager="pip", url=wheel, sha256="cd" * 32)
    lock = Environment("lock", "lock", (locked,))
    (f,) = [f for f in packages.diff(lock, env) if f.subject == "tiny-dist"]
    assert f.kind is Kind.ARTIFACT_DIFFERS
    (info / "direct_url.json").unlink()  # from an index: no hash recorded, nothing claimed
    env = environments.from_prefix(runtime_prefix)
    assert not [f for f in packages.diff(lock, env) if f.subject == "tiny-dist"]
