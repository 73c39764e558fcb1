"""pixi.lock, read by pixi's own reader (py-rattler's ``LockFile``, rattler_lock): one
environment's conda and pypi packages for each of its platforms, with their hashes, as the
entries of the conda-lock model (lock/locked.py), so every command that reads a lock reads it.

pixi writes rattler_lock's formats 4 to 7 (format 5 by pixi 0.2x, 6 by pixi 0.40 to 0.5x, 7 by
current pixi, which lists ``platforms`` at the top). Formats 1 to 3 have conda-lock's shape
(``metadata``/``package``) and are lockfile.py's to read or refuse. A format rattler_lock does
not know is refused by its number before anything else is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envtool import private
from envtool.errors import InputError, shown
from envtool.lock import names
from envtool.lock.locked import LockedPackage, fail

FORMATS = (4, 5, 6, 7)  # what py-rattler 0.28 reads in pixi's shape
DEFAULT = "default"  # pixi's environment when none is named
_TOP = re.compile(r"^environments:", re.MULTILINE)
_VERSION = re.compile(r"^version:[ \t]*([^\s#]*)", re.MULTILINE)
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_HEX = re.compile(r"[0-9a-f]{64}")
_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class PixiEnvironment:
    """One environment of a pixi.lock: its channels, platforms and packages."""

    channels: tuple[str, ...]
    platforms: tuple[str, ...]
    packages: tuple[LockedPackage, ...]
    origin: str  # "pixi.lock format 6, environment 'default'"


def format_of(text: str) -> tuple[str, int] | None:
    """The format version a pixi.lock states and its line; None when ``text`` is not one
    (no top-level ``environments``)."""
    if not _TOP.search(text):
        return None
    found = _VERSION.search(text)
    if found is None:
        return "", 1
    return found.group(1).strip("'\""), text.count("\n", 0, found.start()) + 1


def _checked_format(path: Path, text: str) -> int:
    found = format_of(text)
    assert found is not None, "not a pixi.lock"
    value, line = found
    if not value.isdigit() or int(value) not in FORMATS:
        said = shown(value, 40) if value else "missing"
        raise fail(
            path,
            line,
            f"pixi.lock format version {said} is not read (envtool reads pixi.lock format "
            f"versions {FORMATS[0]} to {FORMATS[-1]}, as py-rattler 0.28 does)",
        )
    return int(value)


def _one_line(path: Path, where: str, *values: str) -> None:
    """Every value is one line without control characters (pip reads a line break as a
    second requirement, issue 24); a URL never starts with '-' (an option to pip)."""
    for value in values:
        if _BREAKS.search(value) or value.lstrip().startswith("-"):
            raise InputError(f"{path}: {where}: {shown(value)} is not a one-line value")


def _conda(path: Path, where: str, pkg: Any, platform: str) -> LockedPackage:
    record = pkg.repo_data_record()
    name, version, url = record.name.source, str(record.version), str(record.url)
    _one_line(path, where, name, version, url)
    entry = LockedPackage(
        name, version, "conda", platform, url,
        record.md5.hex() if record.md5 else None,
        record.sha256.hex() if record.sha256 else None,
        tuple((d.partition(" ")[0], d.partition(" ")[2]) for d in record.depends),
    )  # fmt: skip
    if entry.build != str(record.build):  # envtool reads a conda build from its file name
        raise InputError(
            f"{path}: {where}: {name}'s file name {shown(entry.filename)} does not end in its "
            f"build {shown(str(record.build))}"
        )
    return entry


def _digest(pkg: Any, kind: str) -> str | None:
    """A pypi package's md5 or sha256 in hex; None where the lock holds none (a local path,
    a git source: py-rattler's PackageHashes then wraps nothing)."""
    inner = getattr(pkg.hashes, "_hashes", None) if pkg.hashes is not None else None
    value = getattr(inner, kind, None) if inner is not None else None
    return value.hex() if isinstance(value, bytes) and value else None


def _pypi(path: Path, where: str, pkg: Any, platform: str) -> LockedPackage:
    url, _, fragment = str(pkg.location).partition("#")
    md5, sha = _digest(pkg, "md5"), _digest(pkg, "sha256")
    revision = ""
    if fragment.startswith("sha256=") and _HEX.fullmatch(fragment[7:]):
        if sha is not None and sha != fragment[7:]:
            raise InputError(f"{path}: {where}: {pkg.name}'s URL and sha256 disagree")
        sha = fragment[7:]
    elif url.startswith("git+") and _COMMIT.fullmatch(fragment):
        revision = fragment  # pixi pins a git source as git+URL?rev=...#<commit>
    elif fragment:
        url = f"{url}#{fragment}"
    version = "" if pkg.version == "<dynamic>" else str(pkg.version)  # a local project
    _one_line(path, where, pkg.name, version, url)
    return LockedPackage(pkg.name, version, "pip", platform, url, md5, sha, revision=revision)


def _packages(path: Path, env: Any, platform: Any, label: str) -> list[LockedPackage]:
    from rattler import CondaLockedBinaryPackage, PypiLockedPackage

    out, seen = [], set()
    for pkg in env.packages(platform):
        where = f"environment {label!r}, {platform.name}"
        if isinstance(pkg, PypiLockedPackage):
            entry = _pypi(path, where, pkg, platform.name)
        elif isinstance(pkg, CondaLockedBinaryPackage):
            entry = _conda(path, where, pkg, platform.name)
        else:  # pixi build's source packages: no file, no hash
            raise InputError(
                f"{path}: {where}: {pkg.name} is built from source ({shown(pkg.location)}), "
                "not a package file envtool can check"
            )
        if problem := names.why_bad_name(entry.name):
            raise InputError(f"{path}: {where}: {problem}")
        key = names.same_package_key(entry.name, entry.manager, entry.platform)
        if key in seen:
            raise InputError(f"{path}: {where}: {entry.name} ({entry.manager}) is locked twice")
        seen.add(key)
        out.append(entry)
    return out


def _read(path: Path, text: str, version: int) -> Any:
    """rattler's LockFile of ``text`` (the bytes already read: a pipe is not read twice)."""
    from rattler import LockFile

    with private.tempdir("envtool-pixi-") as tmp:
        copy = tmp / "pixi.lock"
        copy.write_text(text, encoding="utf-8")
        try:
            return LockFile.from_path(copy)
        except Exception as exc:  # rattler's parse errors: one line, the file named
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"{path}: pixi.lock format {version}: {shown(first)}") from None


def parse(text: str, path: Path, environment: str = DEFAULT) -> PixiEnvironment:
    """The packages of ``environment`` for each of its platforms."""
    version = _checked_format(path, text)
    lock = _read(path, text, version)
    env = lock.environment(environment)
    if env is None:
        have = ", ".join(sorted(name for name, _ in lock.environments())) or "none"
        raise InputError(f"{path}: pixi.lock has no environment {environment!r} (has: {have})")
    platforms = sorted(env.platforms(), key=lambda p: p.name)
    packages = [p for pl in platforms for p in _packages(path, env, pl, environment)]
    return PixiEnvironment(
        tuple(str(c) for c in env.channels()),
        tuple(p.name for p in platforms),
        tuple(packages),
        f"pixi.lock format {version}, environment {environment!r}",
    )
