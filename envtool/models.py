"""Packages and environments, wherever they were read from (a lock, an export, a node).

Frozen dataclasses shared by every stage; the names helpers decide how a conda package and a
pip distribution of the same thing meet (conda ``pytorch`` is pip ``torch``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

# conda package name → the distribution name pip (and `import`) sees; identity when absent.
# conda-forge's pytorch-cpu / pytorch-gpu are metapackages that only pin pytorch's variant: no
# files, no dist-info; the torch that runs is ``pytorch``, so they stay packages of their own.
CONDA_TO_PYPI = {
    "pytorch": "torch",
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


@dataclass(frozen=True)
class Package:
    """One installed or locked package; empty strings where the source does not say."""

    name: str
    version: str
    build: str = ""
    channel: str = ""  # canonical name (conda-forge), or the channel's URL
    manager: str = "conda"  # conda | pip
    url: str = ""  # the artifact
    md5: str = ""
    sha256: str = ""
    # the match specs it depends on (``cpython >=3.10``) where the source records them (a
    # lock); empty where it does not (an export, a node's answer). Not part of its identity.
    depends: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def key(self) -> str:
        """What packages are matched by across environments."""
        return dist_key(self.name, self.manager)

    def label(self) -> str:
        """``name=version=build`` (conda) or ``name==version`` (pip)."""
        if self.manager == "pip":
            return f"{self.name}=={self.version}"
        return "=".join(p for p in (self.name, self.version, self.build) if p)

    def identity(self) -> Package:
        """The package without its artifact (url and hashes): what a name/version/build
        comparison is about."""
        return replace(self, url="", md5="", sha256="")


@dataclass(frozen=True)
class Requirement:
    """One line of a spec list (``conda env export --from-history``, a hand-edited export):
    what ``conda env create`` is asked for (a name, maybe a version range, a channel), not
    what it installed; judge/specs.py says which package meets it."""

    text: str  # as written: ``pytorch::pytorch>=2``, ``numpy``; pip: ``torch==2.1.0``
    name: str  # the package it names
    manager: str = "conda"  # conda | pip
    line: int = 0  # where it is written (1-based; 0: unknown)


@dataclass(frozen=True)
class Environment:
    """The packages of one environment, wherever they were read from."""

    source: str  # the file, prefix or host they came from
    kind: str  # lock | export | prefix | probe | specs
    packages: tuple[Package, ...]
    name: str = ""
    prefix: str = ""
    # conda-meta records conda ignores (file, the name it carries, why): never "absent"
    unreadable: tuple[tuple[str, str, str], ...] = ()
    # a spec list (kind "specs"): what was asked for, met by another environment's packages
    specs: tuple[Requirement, ...] = ()
    # a prefix's install stamp: the sha256 of the lock that made it ("" none; lock/stamp.py)
    stamp: str = ""
