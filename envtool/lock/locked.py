"""One package of a conda-lock v1 file: the model, the strict reading of an entry, and the
merging of the entries conda-lock writes for a package in several categories.

conda-lock >= 2 writes a package that belongs to several categories (``main`` and ``dev``,
...) as one v1 entry per category, identical but for ``category`` and ``optional``, and its
reader merges them again (conda_lock/lockfile/v2prelim/models.py). Entries of one name,
manager and platform that differ in anything else are one package locked twice: refused.

For a pip dependency from a VCS (``git+https://...@<commit>``) conda-lock stores the commit
id in ``hash.sha256``. That is a revision, not the hash of an artifact: it is kept in
``revision`` and ``sha256`` stays empty, so nothing compares it with a file's digest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from envtool.errors import InputError
from envtool.lock import names
from envtool.yamlio import line_of

_PKG_KEYS = frozenset(
    {
        "name",
        "version",
        "manager",
        "platform",
        "dependencies",
        "url",
        "hash",
        "category",
        "optional",
        "source",
        "build",
    }
)
_MD5 = re.compile(r"[0-9a-f]{32}")  # fullmatch: '$' would let a trailing newline through
_SHA256 = re.compile(r"[0-9a-f]{64}")
_COMMIT = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})")  # SHA-1 or SHA-256 object ids
# what str.splitlines (pip's requirements reader) splits at, and every other control character
_BREAKS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
_ARCHIVE = re.compile(r"(\.tar\.bz2|\.conda)$")
VCS_SCHEMES = ("git+", "hg+", "svn+", "bzr+")  # pip's VCS URL prefixes


@dataclass(frozen=True)
class LockedPackage:
    """One package for one platform (one or several v1 entries, one per category)."""

    name: str
    version: str
    manager: str  # "conda" or "pip"
    platform: str
    url: str
    md5: str | None = None
    sha256: str | None = None  # the artifact's digest; never a VCS commit id
    dependencies: tuple[tuple[str, str], ...] = ()
    categories: tuple[str, ...] = ("main",)  # sorted, as conda-lock writes its entries
    revision: str = ""  # the commit a pip VCS entry pins (conda-lock's hash.sha256)
    source: str = ""  # conda-lock's ``source: {type: url, url: ...}`` of a direct reference

    @property
    def filename(self) -> str:
        """The archive's file name, the last part of the URL."""
        return self.url.rstrip("/").rsplit("/", 1)[-1]

    @property
    def build(self) -> str:
        """The conda build string, taken from the file name (``''`` for pip)."""
        if self.manager != "conda":
            return ""
        stem = _ARCHIVE.sub("", self.filename)
        prefix = f"{self.name}-{self.version}-"
        return stem[len(prefix) :] if stem.startswith(prefix) else stem.rsplit("-", 1)[-1]

    @property
    def subdir(self) -> str:
        """The channel subdir in the URL (``noarch`` for noarch packages)."""
        parts = self.url.rstrip("/").split("/")
        return parts[-2] if len(parts) >= 2 else self.platform

    @property
    def channel_url(self) -> str:
        """The channel's base URL (the URL less subdir and file name)."""
        return self.url.rstrip("/").rsplit("/", 2)[0]

    @property
    def is_vcs(self) -> bool:
        """A pip dependency from a version control system (``git+https://...``)."""
        return self.manager == "pip" and self.url.startswith(VCS_SCHEMES)


def fail(path: Path, line: int, message: str) -> InputError:
    """The one-line ``FILE:LINE: message`` error of a bad lockfile."""
    return InputError(f"{path}:{line}: {message}" if line else f"{path}: {message}")


def _str(path: Path, entry: Any, key: str, required: bool = True) -> str:
    value = entry.get(key)
    if value is None and not required:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)  # conda-lock writes version: 0.1 unquoted at times
    if not isinstance(value, str) or (required and not value):
        raise fail(
            path,
            line_of(entry, key) if key in entry else line_of(entry),
            f"'{key}' must be a non-empty string",
        )
    return value


def _url_revision(url: str) -> str:
    """The ``@rev`` a VCS URL pins after its path (``git+ssh://git@host/r.git@rev``)."""
    rest = url.split("+", 1)[1].split("#", 1)[0]
    _, _, tail = rest.partition("://")
    _, slash, path = tail.partition("/")
    return path.rpartition("@")[2] if slash and "@" in path else ""


def _vcs_revision(path: Path, hashes: Any, url: str, sha: Any) -> str:
    line = line_of(hashes, "sha256") if "sha256" in hashes else line_of(hashes)
    if not (isinstance(sha, str) and _COMMIT.fullmatch(sha)):
        raise fail(path, line, "a pip VCS entry keeps its commit id (40 hex digits) in sha256")
    pinned = _url_revision(url)
    if _COMMIT.fullmatch(pinned) and pinned != sha:
        raise fail(path, line, f"the URL pins commit {pinned} but sha256 says {sha}")
    return sha


def _hashes(path: Path, entry: Any, manager: str, url: str) -> tuple[str | None, str | None, str]:
    """md5, sha256 and the VCS revision of an entry."""
    hashes = entry.get("hash")
    if not isinstance(hashes, dict):
        raise fail(path, line_of(entry), "package entry needs a 'hash' mapping")
    unknown = set(hashes) - {"md5", "sha256"}
    if unknown:
        raise fail(path, line_of(hashes), f"unknown hash kind {sorted(unknown)[0]!r}")
    md5, sha = hashes.get("md5"), hashes.get("sha256")
    if md5 is not None and not (isinstance(md5, str) and _MD5.fullmatch(md5)):
        raise fail(path, line_of(hashes, "md5"), "md5 must be 32 hex digits")
    if manager == "pip" and url.startswith(VCS_SCHEMES):
        return md5, None, _vcs_revision(path, hashes, url, sha)
    if sha is not None and not (isinstance(sha, str) and _SHA256.fullmatch(sha)):
        raise fail(path, line_of(hashes, "sha256"), "sha256 must be 64 hex digits")
    if manager == "conda" and md5 is None:
        raise fail(path, line_of(hashes), "a conda entry must carry an md5 hash")
    if manager == "pip" and sha is None and md5 is None:
        raise fail(path, line_of(hashes), "a pip entry must carry a sha256 hash")
    return md5, sha, ""


def only_keys(path: Path, value: Any, known: frozenset[str], what: str) -> None:
    """``value`` is a mapping holding only ``known`` keys; else the file and line say why."""
    if not isinstance(value, dict):
        raise fail(path, line_of(value), f"{what} must be a mapping")
    for key in value:
        if key not in known:
            raise fail(path, line_of(value, key), f"unknown {what} field {key!r}")


def _source(path: Path, entry: Any) -> str:
    source = entry.get("source")
    if source is None:
        return ""
    only_keys(path, source, frozenset({"type", "url"}), "source")
    url = source.get("url")
    if source.get("type") != "url" or not isinstance(url, str) or not url:
        raise fail(path, line_of(entry, "source"), "source must be {type: url, url: ...}")
    return url


def _one_line(path: Path, entry: Any, name: str, node: Any, key: str = "") -> None:
    """Every string of an entry (keys too) is one line: a line break or NUL in a URL became
    a second requirement in pip's requirements file (issue 24)."""
    items: Any = node.items() if isinstance(node, dict) else ()
    if isinstance(node, list):
        items = enumerate(node)
    for k, value in items:
        field = str(k) if isinstance(k, str) else key
        for text in (k, value):
            if isinstance(text, str) and _BREAKS.search(text):
                raise fail(
                    path,
                    line_of(node, k) or line_of(entry),
                    f"package {name!r}: '{field}' holds a line break or control character "
                    f"({text!r})",
                )
        _one_line(path, entry, name, value, field)


def _package(path: Path, entry: Any) -> LockedPackage:
    only_keys(path, entry, _PKG_KEYS, "package")
    for key, why in (("name", names.why_bad_name), ("version", names.why_bad_version)):
        if problem := why(_str(path, entry, key)):
            of = f" (package {entry.get('name')!r})" if key == "version" else ""
            raise fail(path, line_of(entry, key), problem + of)
    _one_line(path, entry, str(entry.get("name")), entry)
    manager = _str(path, entry, "manager")
    if manager not in ("conda", "pip"):
        raise fail(
            path, line_of(entry, "manager"), f"manager must be conda or pip, not {manager!r}"
        )
    deps = entry.get("dependencies") or {}
    if not isinstance(deps, dict):
        raise fail(path, line_of(entry, "dependencies"), "'dependencies' must be a mapping")
    if not isinstance(entry.get("optional", False), bool):
        raise fail(path, line_of(entry, "optional"), "'optional' must be true or false")
    url = _str(path, entry, "url")
    if url.lstrip().startswith("-"):
        raise fail(
            path,
            line_of(entry, "url"),
            f"package {entry.get('name')!r}: url {url!r} is a pip option, not a URL",
        )
    md5, sha, revision = _hashes(path, entry, manager, url)
    return LockedPackage(
        name=_str(path, entry, "name"),
        version=_str(path, entry, "version"),
        manager=manager,
        platform=_str(path, entry, "platform"),
        url=url,
        md5=md5,
        sha256=sha,
        dependencies=tuple((str(k), "" if v is None else str(v)) for k, v in deps.items()),
        categories=(_str(path, entry, "category", required=False) or "main",),
        revision=revision,
        source=_source(path, entry),
    )


def _difference(a: LockedPackage, b: LockedPackage) -> str:
    """The first field in which two entries of one package differ ("" when none does)."""
    for field in ("name", "version", "url", "md5", "sha256", "revision", "source"):
        if getattr(a, field) != getattr(b, field):
            return f"{field} {getattr(a, field)!r} vs {getattr(b, field)!r}"
    if dict(a.dependencies) != dict(b.dependencies):
        return "dependencies"
    return ""


def _merge(path: Path, entries: Any, parsed: list[LockedPackage]) -> tuple[LockedPackage, ...]:
    """One package per name, manager and platform; its categories those of its entries.

    Categories are collected in a set per package and sorted once at the end: rebuilding the
    sorted tuple at every entry made one package in 16,000 categories take 100 s."""
    first: dict[tuple[str, str, str], int] = {}
    categories: dict[int, set[str]] = {}  # by the index of a package's first entry
    for i, pkg in enumerate(parsed):
        j = first.setdefault(names.same_package_key(pkg.name, pkg.manager, pkg.platform), i)
        if j == i:
            categories[i] = set(pkg.categories)
            continue
        held, where = parsed[j], f"{pkg.name} ({pkg.manager}, {pkg.platform})"
        if pkg.name != held.name or pkg.categories[0] in categories[j]:
            # conda-lock keys entries by these three: a second one is ambiguous
            raise fail(path, line_of(entries, i), f"duplicate entry for {where}")
        if diff := _difference(held, pkg):
            at = line_of(entries, j)
            raise fail(
                path,
                line_of(entries, i),
                f"conflicting entries for {where}: {diff} (first: line {at})",
            )
        categories[j].add(pkg.categories[0])
    return tuple(
        replace(parsed[i], categories=tuple(sorted(found))) for i, found in categories.items()
    )


def read_entries(path: Path, entries: list[Any]) -> tuple[LockedPackage, ...]:
    """The packages of a v1 ``package`` list, per-category entries merged."""
    return _merge(path, entries, [_package(path, e) for e in entries])


def write_entries(pkg: LockedPackage) -> list[dict[str, Any]]:
    """The v1 entries of a package, one per category (as conda-lock writes them)."""
    hashes: dict[str, str] = {}
    if pkg.md5:
        hashes["md5"] = pkg.md5
    if pkg.sha256 or pkg.revision:
        hashes["sha256"] = pkg.sha256 or pkg.revision
    out = []
    for category in pkg.categories:
        entry: dict[str, Any] = {
            "name": pkg.name,
            "version": pkg.version,
            "manager": pkg.manager,
            "platform": pkg.platform,
            "dependencies": dict(pkg.dependencies),
            "url": pkg.url,
            "hash": dict(hashes),
            "category": category,
            "optional": category != "main",
        }
        if pkg.source:
            entry["source"] = {"type": "url", "url": pkg.source}
        out.append(entry)
    return out
