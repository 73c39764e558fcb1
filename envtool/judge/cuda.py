"""Where an environment says which CUDA it runs, in every packaging, and the drivers each needs.

CUDA ≤ 11.8 is one ``cudatoolkit`` package; from 12 the ``cuda-version`` metapackage pins the
minor and the toolkit is split (``cuda-cudart``, ``cuda-nvrtc``, ...); the pytorch channel adds
``pytorch-cuda`` with the nvidia channel's ``cuda-runtime``; pip brings ``nvidia-*-cuXX``
wheels; and the torch build names its own CUDA (``cuda118_*``, ``+cu121``). Pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envtool.models import Environment, Package

# conda packages whose version is the CUDA toolkit's own (12.4.127 → 12.4); ``cuda`` and
# ``cuda-toolkit`` are metapackages (nvidia, conda-forge), compared as themselves
SPLIT = frozenset(
    {
        "cuda", "cuda-runtime", "cuda-cudart", "cuda-cudart-dev", "cuda-nvrtc", "cuda-nvcc",
        "cuda-libraries", "cuda-libraries-dev", "cuda-toolkit", "cuda-cupti", "cuda-nvtx",
        "cuda-compiler", "cuda-driver-dev",
    }
)  # fmt: skip
_WHEEL = re.compile(r"^nvidia-[a-z0-9-]+?-cu(\d{2})$")  # nvidia-cublas-cu12 → 12
_RUNTIME_WHEEL = re.compile(r"^nvidia-cuda-runtime(?:-cu\d{2})?$")

# Linux drivers (NVIDIA CUDA Toolkit release notes, "CUDA Toolkit and Corresponding Driver
# Versions", GA rows; minor-version compatibility minimums from NVIDIA's "CUDA Compatibility"
# guide: 11.x >= 450.80.02, 12.x >= 525.60.13, 13.x >= 580).
MINOR_COMPAT = {"11": "450.80.02", "12": "525.60.13", "13": "580.65.06"}
GA_DRIVER = {
    "11.0": "450.51.05", "11.1": "455.23", "11.2": "460.27.03", "11.3": "465.19.01",
    "11.4": "470.42.01", "11.5": "495.29.05", "11.6": "510.39.01", "11.7": "515.43.04",
    "11.8": "520.61.05", "12.0": "525.60.13", "12.1": "530.30.02", "12.2": "535.54.03",
    "12.3": "545.23.06", "12.4": "550.54.14", "12.5": "555.42.02", "12.6": "560.28.03",
    "12.8": "570.26", "12.9": "575.51.03", "13.0": "580.65.06",
}  # fmt: skip


@dataclass(frozen=True)
class Source:
    """One package that names a CUDA version, and the version it names (``12.4``, or ``12``
    where only the major is known, as in a ``-cu12`` wheel's name)."""

    package: Package
    cuda: str
    what: str  # cuda-version | cudatoolkit | split | pytorch-cuda | torch build | wheel

    @property
    def major(self) -> str:
        """``12`` of ``12.4``."""
        return self.cuda.split(".")[0]


def components(version: str, n: int) -> str:
    """The first ``n`` parts of a version, its local label dropped (``12.4.127`` → ``12.4``)."""
    return ".".join(version.split("+")[0].split(".")[:n])


def torch_build(pkg: Package) -> str | None:
    """The CUDA a torch package is built for (``cuda118_*`` → 11.8, ``+cu121`` → 12.1,
    ``py3.9_cuda11.3_*`` → 11.3); ``cpu`` for a CPU build; None when it does not say."""
    text = pkg.build if pkg.manager == "conda" else pkg.version.partition("+")[2]
    if re.search(r"(^|[_+])cpu", text) or text == "cpu":
        return "cpu"
    dotted = re.search(r"cuda(\d+)\.(\d+)", text)
    if dotted:
        return f"{dotted.group(1)}.{dotted.group(2)}"
    packed = re.search(r"cu(?:da)?(\d{2,3})(?!\d)", text)
    if packed:
        digits = packed.group(1)
        return f"{digits[:-1]}.{digits[-1]}"
    return None


def source(pkg: Package) -> Source | None:
    """What CUDA ``pkg`` names, if any."""
    name = pkg.name.lower()
    if pkg.manager == "conda":
        if name in ("cuda-version", "cudatoolkit", "pytorch-cuda"):
            return Source(pkg, components(pkg.version, 2), name)
        if name in SPLIT:
            return Source(pkg, components(pkg.version, 2), "split")
    if name in ("pytorch", "torch", "libtorch", "pytorch-gpu"):
        cuda = torch_build(pkg)
        return Source(pkg, cuda, "torch build") if cuda and cuda != "cpu" else None
    if pkg.manager == "pip" and _RUNTIME_WHEEL.match(name):
        return Source(pkg, components(pkg.version, 2), "wheel")
    wheel = _WHEEL.match(name) if pkg.manager == "pip" else None
    return Source(pkg, wheel.group(1), "wheel") if wheel else None


def sources(env: Environment) -> list[Source]:
    """Every package of ``env`` that names a CUDA version."""
    return [s for s in (source(p) for p in env.packages) if s is not None]


_PRECEDENCE = ("cuda-version", "cudatoolkit", "pytorch-cuda", "split", "torch build", "wheel")


def env_cuda(env: Environment | None) -> str | None:
    """The CUDA major.minor an environment (a lock) pins: ``cuda-version``, else
    ``cudatoolkit``, ``pytorch-cuda``, the split runtime, the torch build, a runtime wheel."""
    if env is None:
        return None
    found = [s for s in sources(env) if "." in s.cuda]
    for what in _PRECEDENCE:
        for s in found:
            if s.what == what:
                return s.cuda
    return None


def driver_floor(cuda: str | None) -> tuple[str, str | None] | None:
    """(the minimum driver through minor-version compatibility, the toolkit's GA driver or
    None when this table does not know that minor) for a CUDA major.minor; None for a major
    it does not know."""
    if not cuda:
        return None
    minimum = MINOR_COMPAT.get(cuda.split(".")[0])
    return (minimum, GA_DRIVER.get(cuda)) if minimum else None
