"""A package cache the controller fills and the nodes read (``envtool fix --cache DIR``,
``envtool install --cache DIR``), for clusters whose nodes cannot reach the channel.

It is rattler's own cache layout (each package extracted once, its files hard-linked into a
prefix on the same filesystem). The controller fills it from the lock's URLs, each download
checked against the lock's sha256/md5 by rattler (a ``file://`` archive by envtool first). A
node reads it as a second layer behind its own cache, validated in full (every file against
the package's ``paths.json`` hashes), so a file changed in the shared folder is never linked:
that package is fetched again into the node's own cache. What a node took from where is
counted (``Sources``); the counts name no URL, so a channel's credentials are never in them.
"""

from __future__ import annotations

import asyncio
import shutil
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envtool.errors import InputError
from envtool.lock.wheelcache import Taken


@dataclass(frozen=True)
class Sources:
    """Where one install's conda packages came from."""

    shared: str = ""  # the shared cache's path ("" when there is none)
    from_shared: int = 0  # read from the shared cache
    from_own: int = 0  # already in the node's own cache
    fetched: int = 0  # downloaded from the lock's URLs (into the node's own cache)
    refused: int = 0  # of those, the shared cache's copy failed its check (a file changed)
    pip: Taken = field(default_factory=Taken)  # where its pip files came from (wheelcache)

    def said(self) -> str:
        """One line: ``68 conda packages: 66 from the cache /shared/pkgs, 2 downloaded ...``,
        and with a cache, its pip files: ``; 2 pip files: 2 from the cache``."""
        parts = [
            f"{n} {what}"
            for n, what in (
                (self.from_shared, f"from the cache {self.shared}"),
                (self.from_own, "from this node's own cache"),
                (self.fetched, "downloaded from the lock's URLs"),
            )
            if n
        ]
        if self.refused:
            parts.append(f"{self.refused} of them because the cache's copy failed its check")
        total = self.from_shared + self.from_own + self.fetched
        conda = f"{total} conda packages: {', '.join(parts) or 'none'}"
        taken = self.pip
        if not self.shared or not taken.shared + taken.fetched:
            return conda
        pip = [f"{n} {what}" for n, what in ((taken.shared, "from the cache"),
               (taken.fetched, "downloaded from the lock's URLs")) if n]  # fmt: skip
        if taken.refused:
            pip.append(f"{taken.refused} of them because the cache's copy is not the lock's")
        return f"{conda}; {taken.shared + taken.fetched} pip files: {', '.join(pip)}"


def checked_dir(path: Path, *, create: bool) -> Path:
    """``path`` as a cache folder (made when ``create``); InputError when it cannot be one."""
    try:
        if create:
            path.mkdir(parents=True, exist_ok=True)
        if not path.is_dir():
            raise InputError(f"--cache {path}: not a folder")
    except OSError as exc:
        raise InputError(f"--cache {path}: {exc.strerror}") from None
    return path.absolute()


def layered(own: Path, shared: Path | None) -> Any:
    """rattler's cache for an install: the node's own (written), then the shared one (read,
    validated in full)."""
    from rattler import PackageCache, PackageCacheLayer, ValidationMode

    layers = [PackageCacheLayer(own)]
    if shared is not None:
        layers.append(PackageCacheLayer(shared).with_validation_mode(ValidationMode.full()))
    return PackageCache.from_layers(layers)


async def _index(path: Path) -> Any:
    from rattler import PackageCache

    return await PackageCache.new_layered([path]).index()


OWN, SHARED, FETCHED = "own", "shared", "fetched"


def places(records: Sequence[Any], own: Path, shared: Path | None) -> list[str]:
    """Where each record will be taken from (OWN, SHARED or FETCHED), from each layer's index
    before the install: a package in both is counted where rattler looks first, the own."""

    async def both() -> tuple[Any, Any]:
        mine = await _index(own) if own.is_dir() else None
        theirs = await _index(shared) if shared is not None and shared.is_dir() else None
        return mine, theirs

    mine, theirs = asyncio.run(both())
    out = []
    for record in records:
        if mine is not None and mine.contains_record(record):
            out.append(OWN)
        elif theirs is not None and theirs.contains_record(record):
            out.append(SHARED)
        else:
            out.append(FETCHED)
    return out


def counted(
    where: Sequence[str], records: Sequence[Any], own: Path, shared: Path | None
) -> Sources:
    """``places``' answer after the install: a record the shared cache held that is now in
    the own cache was fetched again, rattler having found the shared copy changed."""
    after = places(records, own, None)
    refused = sum(w == SHARED and a == OWN for w, a in zip(where, after, strict=True))
    return Sources(str(shared) if shared is not None else "", where.count(SHARED) - refused,
                   where.count(OWN), where.count(FETCHED) + refused, refused)  # fmt: skip


def fill(records: Sequence[Any], shared: Path, platform: str) -> int:
    """The shared cache holds every record afterwards (downloaded, hash-checked, extracted):
    linked once into a scratch prefix inside it (hard links: no copy), which is then removed.
    The number of records it holds."""
    from rattler import PackageCache, install
    from rattler.platform import Subdir

    scratch = Path(tempfile.mkdtemp(prefix=".envtool-fill-", dir=shared))
    try:
        asyncio.run(
            install(
                list(records),
                target_prefix=str(scratch),
                platform=Subdir(platform),
                show_progress=False,
                package_cache=PackageCache.new_layered([shared]),
            )
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return len(records)


def entry(name: str, version: str, build: str) -> str:
    """The folder rattler's cache keeps a package in (its ``.lock`` beside it: the archive's
    sha256, compared with the lock's when the package is read)."""
    return f"{name}-{version}-{build}"


def add_packages(tar: tarfile.TarFile, shared: Path, entries: Sequence[str]) -> None:
    """What ``--push`` sends each node beside the lock: the lock's packages in the filled
    cache (``pkgs/``, each folder with its ``.lock``), hard links kept."""
    for name in entries:
        for part in (name, f"{name}.lock"):
            if (shared / part).exists():
                tar.add(shared / part, f"pkgs/{part}")
