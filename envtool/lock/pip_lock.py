"""Locking the ``pip:`` part of environment.yml with pip's own resolver.

pip resolves for the target Python and platform (``--python-version``, ``--platform``,
``--only-binary=:all:``) inside an empty virtual environment whose site-packages holds a
stub ``.dist-info`` for every Python package the conda solve provides, so pip treats those
as installed, as it would on the node.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import venv
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from envtool import private, proc
from envtool.errors import InputError, ToolError
from envtool.lock import pip_install
from envtool.lock.lockfile import LockedPackage
from envtool.lock.spec import EnvSpec
from envtool.models import CONDA_TO_PYPI, normalize

PIP_PLATFORMS = {
    "linux-64": (
        "manylinux_2_28_x86_64",
        "manylinux_2_17_x86_64",
        "manylinux2014_x86_64",
        "manylinux1_x86_64",
        "linux_x86_64",
    ),
    "linux-aarch64": (
        "manylinux_2_28_aarch64",
        "manylinux_2_17_aarch64",
        "manylinux2014_aarch64",
        "linux_aarch64",
    ),
    "osx-64": ("macosx_11_0_x86_64", "macosx_10_15_x86_64", "macosx_10_9_x86_64"),
    "osx-arm64": ("macosx_11_0_arm64",),
    "win-64": ("win_amd64",),
}
_PEP440 = re.compile(r"^\d+(\.\d+)*([abc]|rc)?\d*(\.post\d+)?(\.dev\d+)?$")
_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
PIP_TIMEOUT = 600.0


def _python_version(conda: Iterable[LockedPackage], platform: str) -> str:
    for pkg in conda:
        if pkg.platform == platform and pkg.name == "python":
            return ".".join(pkg.version.split(".")[:2])
    raise InputError(f"pip dependencies need python among the conda packages ({platform})")


def _stub_site(root: Path, conda: Iterable[LockedPackage], platform: str) -> None:
    """An empty venv whose site-packages holds a stub dist-info per conda Python package."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    site = next((root / "lib").glob("python*/site-packages"))
    for pkg in conda:
        depends_on_python = any(name == "python" for name, _ in pkg.dependencies)
        if pkg.platform != platform or not depends_on_python or not _PEP440.match(pkg.version):
            continue
        dist = CONDA_TO_PYPI.get(pkg.name, pkg.name)
        info = site / f"{normalize(dist).replace('-', '_')}-{pkg.version}.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: {pkg.version}\n"
        )
        (info / "INSTALLER").write_text("conda\n")
        (info / "RECORD").write_text("")


def _pip_argv(env: EnvSpec, python: Path, pyver: str, platform: str) -> list[str]:
    if platform not in PIP_PLATFORMS:
        raise InputError(f"pip locking does not know the wheel tags of platform {platform}")
    argv = [
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "install",
        "--dry-run",
        "--quiet",
        "--report",
        "-",
        "--only-binary=:all:",
        "--python-version",
        pyver,
        "--disable-pip-version-check",
        "--no-input",
    ]
    for tag in PIP_PLATFORMS[platform]:
        argv += ["--platform", tag]
    for i, repo in enumerate(env.pip_repositories):
        argv += ["--index-url" if i == 0 else "--extra-index-url", repo]
    return argv + ["--"] + [d.spec for d in env.pip]


def _sha256_of(url: str, hashes: dict[str, Any]) -> str:
    if isinstance(hashes.get("sha256"), str):
        return str(hashes["sha256"])
    parsed = urlparse(url)
    if parsed.scheme == "file":
        return hashlib.sha256(Path(unquote(parsed.path)).read_bytes()).hexdigest()
    raise ToolError(f"pip gave no sha256 for {url}; use an index that publishes hashes")


def _entry(item: dict[str, Any], platform: str) -> LockedPackage:
    meta = item.get("metadata") or {}
    info = item.get("download_info") or {}
    url = str(info.get("url", ""))
    hashes = (info.get("archive_info") or {}).get("hashes") or {}
    deps: list[tuple[str, str]] = []
    for req in meta.get("requires_dist") or ():
        if "extra ==" in req:
            continue
        match = _REQ_NAME.match(req)
        if match:
            name = match.group(1)
            deps.append((normalize(name), req[match.end() :].split(";")[0].strip()))
    return LockedPackage(
        name=normalize(str(meta.get("name", ""))),
        version=str(meta.get("version", "")),
        manager="pip",
        platform=platform,
        url=url,
        sha256=_sha256_of(url, hashes),
        dependencies=tuple(deps),
    )


def lock_pip(
    env: EnvSpec, platforms: tuple[str, ...], conda: list[LockedPackage], cache_dir: Path
) -> list[LockedPackage]:
    """pip entries for every platform, resolved against what conda already provides."""
    out: list[LockedPackage] = []
    for platform in platforms:
        pyver = _python_version(conda, platform)
        with private.tempdir("envtool-pip-") as tmp:
            root = tmp / "venv"
            _stub_site(root, conda, platform)
            argv = _pip_argv(env, root / "bin" / "python", pyver, platform)
            try:
                result = proc.run(
                    argv, timeout=PIP_TIMEOUT, env={"PIP_CACHE_DIR": str(cache_dir / "pip")}
                )
            except proc.ProcessError as exc:
                raise InputError(
                    f"{env.path}: pip cannot resolve the pip dependencies for {platform}: {exc}"
                ) from None
        try:
            report = json.loads(result.stdout)
        except json.JSONDecodeError:
            raise ToolError("pip printed no JSON report (pip >= 23.0 is needed)") from None
        for entry in (_entry(item, platform) for item in report.get("install", [])):
            pip_install.requirement(env.path, entry)  # what install will build, checked now
            out.append(entry)
    return out
