"""The real conda-lock 4.x CLI locks, renders and installs offline through the micromamba double.

``fixtures/fake_micromamba.py`` answers conda-lock's micromamba calls with py-rattler, so these
tests exercise conda-lock itself against a local ``file://`` channel (no conda binary exists here).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fixtures.channel import build_channel, realistic_packages
from fixtures.fake_micromamba import make_fake_micromamba

IN_CI = os.environ.get("CI", "").lower() == "true"
TIMEOUT_S = 120  # conda-lock retries downloads for ~60 s when it cannot find its executable

EXPECTED = {
    "_libgcc_mutex",
    "cudatoolkit",
    "libgcc-ng",
    "nccl",
    "numpy",
    "pip",
    "python",
    "python_abi",
    "pytorch",
}

VIRTUAL_PACKAGES = """\
subdirs:
  linux-64:
    packages:
      __glibc: "2.28"
      __cuda: "11.8"
      __unix: "0"
      __linux: "5.10"
"""


def _require(module: str) -> None:
    if importlib.util.find_spec(module) is not None:
        return
    reason = f"{module} is not importable (pip install -e '.[test]')"
    if IN_CI:
        pytest.fail(f"prerequisite missing under CI=true: {reason}")
    pytest.skip(reason)


def _conda_lock(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDA_OVERRIDE_")}
    env.pop("CONDA_FLAGS", None)
    env["CONDA_PKGS_DIRS"] = str(cwd / "pkgs")  # install's package cache (lock sets its own)
    proc = subprocess.run(
        [sys.executable, "-m", "conda_lock", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, f"conda-lock {args[0]} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    _require("conda_lock")
    _require("rattler")
    channel = build_channel(tmp_path / "channel", realistic_packages())
    deps = ["python=3.9", "pytorch=*=cuda118*", "cudatoolkit=11.8", "nccl", "numpy", "pip"]
    lines = ["channels:", f"  - {channel.as_uri()}", "dependencies:"]
    (tmp_path / "environment.yml").write_text("\n".join([*lines, *(f"  - {d}" for d in deps)]))
    (tmp_path / "virtual-packages.yml").write_text(VIRTUAL_PACKAGES)
    make_fake_micromamba(tmp_path / "bin")
    return tmp_path


def _lock(workdir: Path) -> dict[str, Any]:
    _conda_lock(
        workdir,
        "lock",
        "--conda", str(workdir / "bin" / "micromamba"),
        "-f", "environment.yml",
        "-p", "linux-64",
        "--virtual-package-spec", "virtual-packages.yml",
        "--lockfile", "conda-lock.yml",
    )  # fmt: skip
    import yaml

    doc: dict[str, Any] = yaml.safe_load((workdir / "conda-lock.yml").read_text())
    return doc


def _archive(workdir: Path, url: str) -> Path:
    prefix = (workdir / "channel").as_uri() + "/"
    assert url.startswith(prefix), url
    return workdir / "channel" / url[len(prefix) :]


def test_conda_lock_locks_cuda_build_with_hashes(workdir: Path) -> None:
    doc = _lock(workdir)
    assert doc["version"] == 1
    assert doc["metadata"]["platforms"] == ["linux-64"]
    packages = {p["name"]: p for p in doc["package"]}
    assert set(packages) == EXPECTED  # virtual packages (__cuda, __glibc) are not locked
    assert "cuda118" in packages["pytorch"]["url"].rsplit("/", 1)[-1]
    assert packages["cudatoolkit"]["version"] == "11.8.0"
    assert packages["python"]["version"] == "3.9.18"
    assert packages["pytorch"]["dependencies"]["__cuda"] == ""
    for pkg in doc["package"]:
        data = _archive(workdir, pkg["url"]).read_bytes()
        assert pkg["manager"] == "conda" and pkg["platform"] == "linux-64"
        assert pkg["hash"]["md5"] == hashlib.md5(data).hexdigest(), pkg["name"]
        assert pkg["hash"]["sha256"] == hashlib.sha256(data).hexdigest(), pkg["name"]


def test_conda_lock_renders_and_installs(workdir: Path) -> None:
    _lock(workdir)
    _conda_lock(workdir, "render", "-k", "explicit", "-p", "linux-64", "conda-lock.yml")
    explicit = (workdir / "conda-linux-64.lock").read_text().splitlines()
    assert "@EXPLICIT" in explicit
    urls = [line for line in explicit if line.startswith("file://")]
    assert len(urls) == len(EXPECTED)
    assert any("/pytorch-2.1.0-cuda118_" in u for u in urls)

    prefix = workdir / "env"
    micromamba = str(workdir / "bin" / "micromamba")
    _conda_lock(workdir, "install", "--conda", micromamba, "-p", str(prefix), "conda-lock.yml")
    records = [json.loads(p.read_text()) for p in (prefix / "conda-meta").glob("*.json")]
    assert {r["name"] for r in records} == EXPECTED
    torch = next(r for r in records if r["name"] == "pytorch")
    assert torch["build"].startswith("cuda118_")
    assert all(len(r["md5"]) == 32 and len(r["sha256"]) == 64 for r in records)
    assert (prefix / "lib" / "libnccl.so.2").read_bytes() == b"\x7fELF nccl 2.18.3\n"


def test_double_refuses_unknown_calls(tmp_path: Path) -> None:
    exe = make_fake_micromamba(tmp_path)
    assert exe.name == "micromamba" and os.access(exe, os.X_OK)
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.strip().split(".")[0].isdigit()
    proc = subprocess.run([str(exe), "shell", "init"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "unsupported call: micromamba shell init" in proc.stderr
