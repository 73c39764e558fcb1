"""Shared fixtures: a real local conda channel, environment files, the CLI, prerequisites."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fixtures import cpu, kernel_log, netns, runtime
from fixtures.channel import build_channel, realistic_packages
from fixtures.runtime import runtime_packages

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
IN_CI = os.environ.get("CI", "").lower() == "true"
KERNEL_LOG = "ENVTOOL_KERNEL_LOG"  # envtool_node/xid.py VARIABLE


def require(condition: bool, reason: str) -> None:
    """Skip when a prerequisite is missing; under CI=true that is a failure, never a skip."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"prerequisite missing under CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` beside the repo (real lockfiles, the conda-forge snapshot)."""
    data = SHARED / "data"
    require(data.is_dir(), f"{data} is absent (the real-data tests need ../shared)")
    return data


@pytest.fixture(scope="session")
def channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local conda channel with cuda118 and cpu pytorch builds, built once per session."""
    return build_channel(tmp_path_factory.mktemp("channel"), realistic_packages())


@pytest.fixture(scope="session")
def python_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same channel plus packages that describe what runs here (fixtures/runtime.py):
    ``RUNTIME_ENV`` locked from it installs a prefix whose python, torch and records agree."""
    root = tmp_path_factory.mktemp("python-channel")
    return build_channel(root, realistic_packages() + runtime_packages())


RUNTIME_ENV = runtime.ENV  # locks python_channel to what really runs here

VIRTUAL_CUDA = """\
subdirs:
  linux-64:
    packages:
      __unix: "0"
      __linux: "5.10"
      __glibc: "2.28"
      __cuda: "11.8"
"""

ENV_TEMPLATE = """\
name: ddp
channels:
  - {channel}
dependencies:
  - python=3.9
  - pytorch=*=cuda118*
  - cudatoolkit=11.8
  - nccl
  - numpy
  - pip
"""


@dataclass
class Project:
    """A directory with environment.yml and virtual-packages.yml, and the CLI run there."""

    root: Path
    channel: Path
    cache: Path

    @property
    def env(self) -> Path:
        return self.root / "environment.yml"

    @property
    def lock(self) -> Path:
        return self.root / "conda-lock.yml"

    def write_env(self, text: str | None = None) -> Path:
        self.env.write_text(
            text if text is not None else ENV_TEMPLATE.format(channel=self.channel.as_uri())
        )
        return self.env

    def run(self, *args: str) -> tuple[int, str, str]:
        """Run ``envtool`` in-process in ``root``; return (exit code, stdout, stderr)."""
        from envtool.cli import main

        return run_main(
            main,
            self.root,
            _extra(args[0], self.cache) if args else [],
            args,
        )


def _extra(command: str, cache: Path) -> list[str]:
    """What every test's lock and install share: a private cache; installs of the tests'
    local channels (file://, or http on loopback) pass --allow-insecure-url."""
    if command == "install":
        return ["--cache-dir", str(cache), "--allow-insecure-url"]
    return ["--cache-dir", str(cache)] if command == "lock" else []


def run_main(
    main: Callable[[list[str]], int], cwd: Path, extra: list[str], args: tuple[str, ...]
) -> tuple[int, str, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    old = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            argv = list(args[:1]) + extra + list(args[1:])
            code = main(argv)
    finally:
        os.chdir(old)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def project(tmp_path: Path, channel: Path) -> Project:
    """A fresh project dir locking against the local channel with __cuda 11.8."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "virtual-packages.yml").write_text(VIRTUAL_CUDA)
    proj = Project(root, channel, tmp_path / "cache")
    proj.write_env()
    return proj


def pytest_configure(config: pytest.Config) -> None:
    """Every process the tests start reads tests/fixtures/kernel_log.HEALTHY as its kernel
    log (``ENVTOOL_KERNEL_LOG``, whatever the environment said). Each xdist worker's verify
    runs use a rendezvous port of their own (MASTER_PORT, which verify's endpoint takes): the
    sshd and Slurm test clusters of both workers share this machine's network namespace,
    where the store's node listens on that port for a moment; on one port, one worker's
    check would find the other's listener there. Tests that need the default port
    (namespaced labs) drop it (``default_rendezvous_port``)."""
    # Every node package a test starts reads a recorded kernel log, never this machine's:
    # an Xid on a GPU runner (or text another process had the kernel print) is no test's
    # finding. A test about the kernel log names its own (issue 33).
    os.environ[KERNEL_LOG] = str(kernel_log.HEALTHY)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and worker[2:].isdigit():
        os.environ.setdefault("MASTER_PORT", str(29410 + int(worker[2:])))


@pytest.fixture(scope="module")
def cpu_exclusive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The module runs with no timing-judged module beside it (fixtures/cpu.py)."""
    with cpu.held(tmp_path_factory, fcntl.LOCK_EX):
        yield


@pytest.fixture(scope="module")
def cpu_shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The module judges by timing: no CPU-heavy module runs beside it (fixtures/cpu.py)."""
    with cpu.held(tmp_path_factory, fcntl.LOCK_SH):
        yield


@pytest.fixture(scope="module")
def default_rendezvous_port() -> Iterator[None]:
    """The module's verify runs on torchrun's default rendezvous port (29400): its nodes have
    a network namespace of their own, where no other test listens."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MASTER_PORT", raising=False)
        yield


def runtime_project(root: Path, python_channel: Path) -> tuple[Project, Path]:
    """A project under ``root`` whose lock is what runs here (RUNTIME_ENV: this python, its
    torch), locked and installed into ``root/env`` once: a module's cluster shares it."""
    require(runtime.torch_version() is not None, "torch is not installed (pip install torch)")
    (root / "proj").mkdir()
    (root / "proj" / "virtual-packages.yml").write_text(VIRTUAL_CUDA)
    project = Project(root / "proj", python_channel, root / "cache")
    project.write_env(RUNTIME_ENV.format(channel=python_channel.as_uri()))
    assert project.run("lock")[0] == 0
    prefix = root / "env"
    assert project.run("install", "--prefix", str(prefix))[0] == 0
    return project, prefix


@dataclass
class RuntimeLab:
    """Three namespaced sshd nodes (fixtures/netns.py) whose sessions find a prefix with this
    torch, and the project that locked it."""

    lab: netns.Lab
    project: Project
    root: Path  # the lab's folder: node i's /etc/hosts is hosts{i} there


@contextlib.contextmanager
def runtime_lab(
    root: Path, python_channel: Path, setup: dict[int, str] | None = None
) -> Iterator[RuntimeLab]:
    """A module's lab under ``root`` (``setup``: netns.lab's per-node commands); its nodes'
    temp files go to ``root/tmp``."""
    require(netns.available(), "needs root, iproute2 (ip, tc), unshare and sshd")
    project, prefix = runtime_project(root, python_channel)
    (root / "tmp").mkdir()
    env = {"CONDA_PREFIX": str(prefix), "TMPDIR": str(root / "tmp")}
    with netns.lab(root / "lab", 3, env, setup) as lab:
        yield RuntimeLab(lab, project, root / "lab")


@pytest.fixture
def runtime_prefix(project: Project, python_channel: Path, tmp_path: Path) -> Path:
    """RUNTIME_ENV locked in ``project`` and installed: a prefix whose records, artifacts and
    runtime (this interpreter, its torch) agree (fixtures/runtime.py)."""
    require(runtime.torch_version() is not None, "torch is not installed (pip install torch)")
    project.write_env(RUNTIME_ENV.format(channel=python_channel.as_uri()))
    assert project.run("lock")[0] == 0
    prefix = tmp_path / "env"
    assert project.run("install", "--prefix", str(prefix))[0] == 0
    return prefix


def which_or_skip(name: str) -> str:
    path = shutil.which(name)
    require(path is not None, f"{name} is not installed")
    assert path is not None
    return path


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    """``directory`` served over HTTP on a free loopback port, for as long as the block runs."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "http.server",
            str(port),
            "--bind",
            "127.0.0.1",
            "-d",
            str(directory),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{url}/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(scope="session")
def http_channel(channel: Path) -> Iterator[str]:
    """The local channel served over HTTP on loopback (what rattler downloads and hash-checks)."""
    with serve(channel) as url:
        yield url


@pytest.fixture(scope="session")
def locks(tmp_path_factory: pytest.TempPathFactory, python_channel: Path) -> dict[str, Path]:
    """Two locks of one project, locked once from ``python_channel`` (what runs here):
    ``new`` (runtime.LAB_ENV) and ``old`` (the same with an older nccl): envtool fix's tests."""
    require(runtime.torch_version() is not None, "torch is not installed (pip install torch)")
    out = {}
    for name in ("new", "old"):
        env = runtime.LAB_ENV if name == "new" else runtime.LAB_ENV.replace(
            "nccl=2.18.3.1", "nccl=2.16.5.1")  # fmt: skip
        root = tmp_path_factory.mktemp(f"lock-{name}")
        (root / "virtual-packages.yml").write_text(VIRTUAL_CUDA)
        project = Project(root, python_channel, root / "cache")
        project.write_env(env.format(channel=python_channel.as_uri()))
        code, _, err = project.run("lock")
        assert code == 0, err
        out[name] = project.lock
    return out
