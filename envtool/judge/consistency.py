"""Inconsistencies inside one environment (a lock, an export, a prefix, a probe), pure.

Each rule names what a DDP job on that environment will trip over, whatever the lock says:
two torches, CUDA majors mixed, ``cuda-version`` unlike the CUDA runtime packages, two NCCLs,
the pytorch channel's and conda-forge's CUDA stacks mixed, packages built for another Python.
A finding carries the packages involved (``Finding.packages``); words are made in
report/labels.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from envtool.judge import cuda
from envtool.judge.findings import Finding, Kind
from envtool.judge.packages import by_key
from envtool.judge.rules import severity
from envtool.models import Environment, Package

_PY_TAG = re.compile(r"(?:^|[_-]|(?<=\d))(?:py|cp)(\d)(\d{1,2})(?=[_h]|$)")  # py39h, np126py39
_PY_DOTTED = re.compile(r"(?:^|_)py(\d)\.(\d{1,2})(?=_|$)")  # py3.9_cuda11.3_cudnn8.2.0_0
_CPYTHON_FLOOR = re.compile(r"cpython\s*>=\s*(\d+)\.(\d+)")  # cpython >=3.10
_ABI3 = re.compile(r"[\s*_]abi3\b")  # python_abi * *_abi3
_TORCH = frozenset({"pytorch", "libtorch", "pytorch-gpu", "pytorch-cuda", "pytorch-mutex"})
PYTORCH_CHANNELS = frozenset({"pytorch", "nvidia"})


def _finding(kind: Kind, subject: str, pkgs: list[Package], expected: str = "") -> Finding:
    ordered = tuple(sorted({p.identity() for p in pkgs}, key=lambda p: (p.name, p.manager)))
    return Finding(kind, severity(kind), subject, expected, packages=ordered)


def two_torches(env: Environment) -> list[Finding]:
    """conda's pytorch and pip's torch in one environment: ``import torch`` gets pip's, built
    against other CUDA and NCCL libraries than the conda ones beside it."""
    group = by_key(env.packages).get("torch", {})
    if "conda" in group and "pip" in group:
        return [_finding(Kind.TWO_TORCHES, "torch", [group["conda"], group["pip"]])]
    return []


def cuda_mixed(env: Environment) -> list[Finding]:
    """Packages naming two CUDA majors: one process cannot load libraries of both."""
    found = cuda.sources(env)
    majors = sorted({s.major for s in found})
    if len(majors) < 2:
        return []
    return [_finding(Kind.CUDA_MIXED, "CUDA", [s.package for s in found], " and ".join(majors))]


def cuda_version_mismatch(env: Environment) -> list[Finding]:
    """``cuda-version`` X.Y beside CUDA runtime packages of another minor of that major (a
    solve conda would refuse: something was installed around it)."""
    found = cuda.sources(env)
    pins = [s for s in found if s.what == "cuda-version"]
    if not pins:
        return []
    pin = pins[0]
    others = [
        s for s in found
        if s.what in ("cudatoolkit", "split", "pytorch-cuda")
        and s.major == pin.major and s.cuda != pin.cuda
    ]  # fmt: skip
    if not others:
        return []
    pkgs = [pin.package] + [s.package for s in others]
    return [_finding(Kind.CUDA_VERSION_MISMATCH, "cuda-version", pkgs, pin.cuda)]


def two_nccls(env: Environment) -> list[Finding]:
    """Two NCCL libraries (conda's ``nccl`` and a ``nvidia-nccl-cuXX`` wheel, or two wheels):
    which one a rank loads depends on load order ("internal error", pytorch#122571)."""
    nccls = [
        p for p in env.packages
        if (p.manager == "conda" and p.name == "nccl")
        or (p.manager == "pip" and p.key.startswith("nvidia-nccl-cu"))
    ]  # fmt: skip
    return [_finding(Kind.TWO_NCCLS, "NCCL", nccls)] if len(nccls) > 1 else []


def _carries_cuda(pkg: Package) -> bool:
    """A CUDA build or a part of a CUDA toolkit; a CPU build (conda-forge's ``cpu_mkl_*``,
    the pytorch channel's ``pytorch-mutex=*=cpu`` or osx ``py3.9_0``) carries no CUDA stack."""
    if pkg.name == "pytorch-mutex":
        return pkg.build.startswith("cuda")
    return cuda.source(pkg) is not None


def _stack(pkg: Package) -> str | None:
    """Which CUDA PyTorch stack a conda package belongs to: the pytorch channel's
    (``pytorch``/``nvidia`` channels) or conda-forge's; None for the others and for CPU
    builds (the only ones an osx-64 or linux-aarch64 platform of a lock has)."""
    if pkg.manager != "conda" or not (pkg.name in _TORCH or pkg.name in cuda.SPLIT):
        return None
    if not _carries_cuda(pkg):
        return None
    if pkg.channel in PYTORCH_CHANNELS:
        return "pytorch"
    if pkg.channel == "conda-forge" and pkg.name not in ("pytorch-cuda", "pytorch-mutex"):
        return "conda-forge"
    return None


def stacks_mixed(env: Environment) -> list[Finding]:
    """conda-forge's pytorch/CUDA packages beside the pytorch channel's ``pytorch-cuda`` /
    nvidia ``cuda-*``: two builds of the same libraries, linked differently."""
    stacks: dict[str, list[Package]] = {}
    for pkg in env.packages:
        stack = _stack(pkg)
        if stack is not None:
            stacks.setdefault(stack, []).append(pkg)
    if len(stacks) < 2:
        return []
    pkgs = stacks["pytorch"] + stacks["conda-forge"]
    return [_finding(Kind.CUDA_STACKS_MIXED, "CUDA stack", pkgs)]


def python_of(build: str) -> str | None:
    """The Python a conda build string is for: ``py39h...`` → 3.9, ``py3.9_cuda...`` → 3.9,
    ``cp311`` → 3.11; None for noarch (``pyhd8ed1ab_0``) and other builds."""
    match = _PY_DOTTED.search(build) or _PY_TAG.search(build)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _minor(version: str) -> tuple[int, ...]:
    """``(3, 10)`` of ``3.10`` (or of ``3.10.4``)."""
    return tuple(int(p) for p in re.findall(r"\d+", version)[:2])


def abi3_floor(pkg: Package) -> str | None:
    """The oldest Python an abi3 build runs on, from what it depends on: ``cpython >=3.10``
    (CEP 20, conda-forge's python-abi3), else ``_python_abi3_support`` or ``python_abi *
    *_abi3`` with the Python of its build string (``py310h…`` → 3.10); None when its
    dependencies say it is no abi3 build, or the source records none."""
    specs = {d.split()[0]: d for d in pkg.depends if d.split()}
    floor = _CPYTHON_FLOOR.match(specs.get("cpython", ""))
    if floor:
        return f"{floor.group(1)}.{floor.group(2)}"
    if "_python_abi3_support" in specs or _ABI3.search(specs.get("python_abi", "")):
        return python_of(pkg.build)
    return None


def _runs_on(pkg: Package, want: str, abi3_here: bool) -> bool:
    """``pkg``'s extension modules import under Python ``want``: a build for that Python, a
    build for none, or an abi3 build whose floor is not newer. Where the source records no
    dependencies (an export, a node's answer), a build for an older Python counts as abi3
    when the environment holds ``_python_abi3_support``, which conda-forge's abi3 builds
    pull in: without dependencies the two cannot be told apart."""
    built = python_of(pkg.build)
    if built in (None, want):
        return True
    floor = abi3_floor(pkg) if pkg.depends else (built if abi3_here else None)
    return floor is not None and _minor(floor) <= _minor(want)


def other_python(env: Environment) -> list[Finding]:
    """Conda packages built for another Python than the environment's (``py38`` in 3.9):
    their extension modules do not import. abi3 builds run on every Python from their
    floor on (hf-xet, polars on conda-forge: ``py310`` builds in a 3.12 environment)."""
    python = next((p for p in env.packages if p.manager == "conda" and p.name == "python"), None)
    if python is None:
        return []
    want = ".".join(python.version.split(".")[:2])
    abi3_here = any(p.manager == "conda" and p.name == "_python_abi3_support" for p in env.packages)
    wrong = [
        p for p in env.packages
        if p.manager == "conda" and p.name != "python" and not _runs_on(p, want, abi3_here)
    ]  # fmt: skip
    return [_finding(Kind.OTHER_PYTHON, "python", wrong, want)] if wrong else []


RULES: tuple[Callable[[Environment], list[Finding]], ...] = (
    two_torches,
    cuda_mixed,
    cuda_version_mismatch,
    two_nccls,
    stacks_mixed,
    other_python,
)


def check(env: Environment, where: str = "") -> list[Finding]:
    """Every inconsistency inside ``env``; ``where`` names it in the fix lines (a path)."""
    from dataclasses import replace

    return [replace(f, where=where) for rule in RULES for f in rule(env)]
