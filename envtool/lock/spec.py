"""Reading and validating ``environment.yml`` and conda-lock's virtual-package spec file."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envtool import yamlio
from envtool.errors import InputError
from envtool.lock import secrets
from envtool.yamlio import line_of

KNOWN_PLATFORMS = (
    "linux-64",
    "linux-aarch64",
    "linux-ppc64le",
    "osx-64",
    "osx-arm64",
    "win-64",
)
_ENV_KEYS = (
    "name",
    "channels",
    "dependencies",
    "platforms",
    "pip-repositories",
    "prefix",
    "variables",
    "category",
)

# conda-lock's defaults (conda_lock/default-virtual-packages.yaml), used when no spec file is given.
DEFAULT_VIRTUAL_PACKAGES: dict[str, dict[str, str]] = {
    "linux-64": {
        "__unix": "0",
        "__linux": "5.10",
        "__archspec": "1 x86_64",
        "__glibc": "2.28",
        "__cuda": "11.4",
    },
    "linux-aarch64": {
        "__unix": "0",
        "__linux": "5.10",
        "__archspec": "1 aarch64",
        "__glibc": "2.28",
        "__cuda": "11.4",
    },
    "linux-ppc64le": {
        "__unix": "0",
        "__linux": "5.10",
        "__archspec": "1 ppc64le",
        "__glibc": "2.28",
        "__cuda": "11.4",
    },
    "osx-64": {"__unix": "0", "__archspec": "1 x86_64", "__osx": "11.0"},
    "osx-arm64": {"__unix": "0", "__archspec": "1 arm64", "__osx": "11.0"},
    "win-64": {"__win": "0", "__archspec": "1 x86_64", "__cuda": "11.4"},
}
VIRTUAL_SPEC_NAMES = ("virtual-packages.yml", "virtual-packages.yaml")


@dataclass(frozen=True)
class Dep:
    """One requested spec and where it was written."""

    spec: str
    line: int


@dataclass(frozen=True)
class EnvSpec:
    """A validated ``environment.yml``."""

    path: Path
    name: str
    channels: tuple[str, ...]
    conda: tuple[Dep, ...]
    pip: tuple[Dep, ...]
    platforms: tuple[str, ...]
    pip_repositories: tuple[str, ...]

    def where(self, line: int) -> str:
        """``file:line`` for messages about this spec."""
        return f"{self.path}:{line}"


@dataclass(frozen=True)
class VirtualPackage:
    """A virtual package the solver assumes present (``__cuda 11.8``)."""

    name: str
    version: str
    build: str = "0"


def _fail(path: Path, line: int, message: str) -> InputError:
    return InputError(f"{path}:{line}: {message}" if line else f"{path}: {message}")


def _strings(path: Path, parent: Any, key: str) -> tuple[str, ...]:
    value = parent.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _fail(path, line_of(parent, key), f"'{key}' must be a list")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise _fail(path, line_of(value, i), f"'{key}' entries must be non-empty strings")
    return tuple(item.strip() for item in value)


def _dependencies(path: Path, doc: Any) -> tuple[tuple[Dep, ...], tuple[Dep, ...]]:
    deps = doc.get("dependencies")
    if not isinstance(deps, list) or not deps:
        raise _fail(path, line_of(doc, "dependencies"), "'dependencies' must be a non-empty list")
    conda: list[Dep] = []
    pip: list[Dep] = []
    for i, item in enumerate(deps):
        line = line_of(deps, i)
        if isinstance(item, str) and item.strip():
            conda.append(Dep(item.strip(), line))
        elif isinstance(item, dict) and list(item) == ["pip"] and isinstance(item["pip"], list):
            for j, pspec in enumerate(item["pip"]):
                if not isinstance(pspec, str) or not pspec.strip():
                    raise _fail(path, line_of(item["pip"], j), "pip entries must be strings")
                pip.append(Dep(pspec.strip(), line_of(item["pip"], j)))
        else:
            raise _fail(
                path, line, f"a dependency must be a spec string or 'pip: [...]', got {item!r}"
            )
    return tuple(conda), tuple(pip)


def read_env(path: Path) -> EnvSpec:
    """Read and validate an ``environment.yml``; every error names the file and line."""
    doc = yamlio.load_file(path, "environment file")
    if not isinstance(doc, dict):
        raise _fail(path, line_of(doc), "expected a mapping with 'channels' and 'dependencies'")
    for key in doc:
        if key not in _ENV_KEYS:
            raise _fail(
                path, line_of(doc, key), f"unknown key '{key}' (known: {', '.join(_ENV_KEYS)})"
            )
    name = doc.get("name") or path.resolve().parent.name
    if not isinstance(name, str):
        raise _fail(path, line_of(doc, "name"), "'name' must be a string")
    # credentials as ${VAR} templates from here on: nothing downstream can write a secret
    channels = tuple(
        secrets.template(c) for c in _strings(path, doc, "channels") if c != "nodefaults"
    )
    if not channels:
        raise _fail(path, line_of(doc), "no channels given ('channels: [conda-forge]')")
    platforms = _strings(path, doc, "platforms")
    for i, plat in enumerate(platforms):
        if plat not in KNOWN_PLATFORMS:
            raise _fail(path, line_of(doc["platforms"], i), f"unknown platform '{plat}'")
    conda, pip = _dependencies(path, doc)
    return EnvSpec(
        path, name, channels, conda, pip, platforms, _strings(path, doc, "pip-repositories")
    )


def read_virtual_packages(path: Path | None) -> dict[str, tuple[VirtualPackage, ...]]:
    """Virtual packages per platform from conda-lock's spec file, or its defaults."""
    table: Mapping[str, Mapping[str, str]] = DEFAULT_VIRTUAL_PACKAGES
    if path is not None:
        table = _virtual_table(path)
    out: dict[str, tuple[VirtualPackage, ...]] = {}
    for platform, packages in table.items():
        vps = []
        for name, value in packages.items():
            version, _, build = str(value).partition(" ")
            vps.append(VirtualPackage(name, version, build or "0"))
        out[platform] = tuple(vps)
    return out


def _virtual_table(path: Path) -> dict[str, dict[str, str]]:
    doc = yamlio.load_file(path, "virtual-package spec")
    subdirs = doc.get("subdirs") if isinstance(doc, dict) else None
    if not isinstance(subdirs, dict):
        raise _fail(path, line_of(doc), "expected 'subdirs: {PLATFORM: {packages: {...}}}'")
    table: dict[str, dict[str, str]] = {}
    for platform, body in subdirs.items():
        packages = body.get("packages") if isinstance(body, dict) else None
        if platform not in KNOWN_PLATFORMS or not isinstance(packages, dict):
            raise _fail(
                path,
                line_of(subdirs, platform),
                f"'{platform}' must be a known platform with a 'packages' mapping",
            )
        for name, version in packages.items():
            if not (isinstance(name, str) and name.startswith("__")) or version is None:
                raise _fail(
                    path,
                    line_of(packages, name),
                    f"virtual package '{name}' must be named __* and have a version",
                )
        table[platform] = {str(k): str(v) for k, v in packages.items()}
    return table


def find_virtual_spec(env_path: Path) -> Path | None:
    """The ``virtual-packages.yml`` beside the environment file, as conda-lock finds it."""
    for name in VIRTUAL_SPEC_NAMES:
        candidate = env_path.parent / name
        if candidate.is_file():
            return candidate
    return None


def content_hash(
    env: EnvSpec, platform: str, virtual: Mapping[str, tuple[VirtualPackage, ...]]
) -> str:
    """sha256 over everything that decides a platform's solve; stale lock = different hash."""
    payload = {
        "channels": list(env.channels),
        "conda": sorted(d.spec for d in env.conda),
        "pip": sorted(d.spec for d in env.pip),
        "pip_repositories": list(env.pip_repositories),
        "platform": platform,
        "virtual_packages": sorted(
            f"{vp.name} {vp.version} {vp.build}" for vp in virtual.get(platform, ())
        ),
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()
