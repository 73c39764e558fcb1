"""Frozen dataclasses shared by the modules: packages, environments, findings."""

from __future__ import annotations

import re
from dataclasses import dataclass

# conda package name → the distribution name pip (and `import`) sees; identity when absent.
CONDA_TO_PYPI = {
    "pytorch": "torch",
    "pytorch-cpu": "torch",
    "pytorch-gpu": "torch",
    "py-opencv": "opencv-python",
    "matplotlib-base": "matplotlib",
    "tensorflow-base": "tensorflow",
    "pillow-simd": "pillow",
}


def normalize(name: str) -> str:
    """PEP 503 normalized name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def dist_key(name: str, manager: str) -> str:
    """The key two packages are compared by: the PyPI name, so conda pytorch meets pip torch."""
    if manager == "conda":
        name = CONDA_TO_PYPI.get(name, name)
    return normalize(name)


def channel_name(channel: str) -> str:
    """``https://conda.anaconda.org/conda-forge/linux-64`` → ``conda-forge``; URLs stay URLs."""
    text = channel.rstrip("/")
    for subdir in (
        "/noarch",
        "/linux-64",
        "/linux-aarch64",
        "/linux-ppc64le",
        "/osx-64",
        "/osx-arm64",
        "/win-64",
    ):
        if text.endswith(subdir):
            text = text[: -len(subdir)]
    for base in ("https://conda.anaconda.org/", "http://conda.anaconda.org/"):
        if text.startswith(base):
            return text[len(base) :]
    if text in ("https://repo.anaconda.com/pkgs/main", "pkgs/main"):
        return "defaults"
    return text


@dataclass(frozen=True)
class Package:
    """One installed or locked package; empty strings where the source does not say."""

    name: str
    version: str
    build: str = ""
    channel: str = ""
    manager: str = "conda"  # conda | pip

    @property
    def key(self) -> str:
        """What packages are matched by across environments."""
        return dist_key(self.name, self.manager)

    def label(self) -> str:
        """``name=version=build`` (conda) or ``name==version`` (pip)."""
        if self.manager == "pip":
            return f"{self.name}=={self.version}"
        return "=".join(p for p in (self.name, self.version, self.build) if p)


@dataclass(frozen=True)
class Environment:
    """The packages of one environment, wherever they were read from."""

    source: str  # the file, prefix or host they came from
    kind: str  # lock | export | prefix | probe
    packages: tuple[Package, ...]
    name: str = ""
    prefix: str = ""


@dataclass(frozen=True)
class Finding:
    """One difference or problem, with what was expected and a one-line fix."""

    kind: str
    severity: str  # error | warning | info
    subject: str  # the package or fact concerned
    expected: str
    actual: str
    hint: str = ""
    hosts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Device:
    """One GPU as torch sees it."""

    index: int
    name: str
    capability: str = ""
    total_memory: int = 0
    uuid: str = ""


@dataclass(frozen=True)
class NodeFacts:
    """What gpu_facts.py reported, validated."""

    hostname: str = ""
    python: str = ""
    torch: str | None = None
    cuda: str | None = None
    cuda_available: bool = False
    device_count: int = 0
    devices: tuple[Device, ...] = ()
    driver: str | None = None
    cudnn: str | None = None
    nccl: str | None = None
    glibc: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class AllReduceSummary:
    """The part of an all-reduce run the checks need."""

    backend: str
    nranks: int
    peak_busbw: float | None  # best busbw over the largest sizes run
    wrong_total: int
    error: str = ""
    member: bool = False  # a multi-node run's node without rank 0: its result is elsewhere


@dataclass(frozen=True)
class HostReport:
    """Everything known about one host after the fan-out."""

    host: str
    ok: bool
    error: str = ""
    env: Environment | None = None
    facts: NodeFacts | None = None
    allreduce: AllReduceSummary | None = None
    seconds: float = 0.0
    problems: tuple[str, ...] = ()  # parts of the node document that failed or were garbage
