"""The lock's pip files in the package cache ``--cache DIR`` beside its conda packages
(lock/pkgcache.py): ``DIR/pip/FILE``, FILE the last part of the lock's URL. The controller
downloads each from the lock's URL and keeps it only when its sha256 is the lock's (written
under a temporary name, renamed when checked). An install reads it as it reads the conda
layer: a file is used only when its sha256 is the lock's, and pip checks it again
(``--require-hashes``, lock/pip_install.py), so a file changed in the shared folder is never
installed: that wheel is fetched from the lock's URL instead, and said. A URL's credentials
are sent as the request's Basic authorization, never written to the cache or a message."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlsplit, urlunsplit

from envtool.errors import InstallError
from envtool.lock.lockfile import LockedPackage

SUBDIR = "pip"
_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*\.(?:whl|tar\.gz|zip)")
_CHUNK = 1 << 20
TIMEOUT = 60.0  # seconds without a byte from the server
MAX_FILE = 16 << 30  # a pip file's bytes at most (torch's CUDA wheels are ~2.5 GiB)


class Pinned(Protocol):
    """A pip entry as the lock (LockedPackage) or an environment (models.Package) has it."""

    @property
    def url(self) -> str: ...

    @property
    def sha256(self) -> str | None: ...


def file_name(pkg: Pinned) -> str | None:
    """The file the cache keeps ``pkg`` as; None when it keeps none (no sha256 to check it
    by, or a URL whose last part is not a plain wheel or sdist name)."""
    name = unquote(urlsplit(pkg.url).path.rsplit("/", 1)[-1])
    return name if pkg.sha256 and _FILE.fullmatch(name) else None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _request(url: str) -> urllib.request.Request:
    """The URL without its credentials, which go in the Authorization header."""
    parts = urlsplit(url)
    if parts.username is None:
        return urllib.request.Request(url)
    host = parts.hostname or ""
    bare = urlunsplit(parts._replace(netloc=f"{host}:{parts.port}" if parts.port else host))
    token = base64.b64encode(f"{unquote(parts.username)}:{unquote(parts.password or '')}"
                             .encode()).decode()  # fmt: skip
    return urllib.request.Request(bare, headers={"Authorization": f"Basic {token}"})


def _download(pkg: LockedPackage, target: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".envtool-", dir=target.parent)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(
            _request(pkg.url), timeout=TIMEOUT
        ) as answer:  # fmt: skip
            size = 0
            while chunk := answer.read(_CHUNK):
                size += len(chunk)
                if size > MAX_FILE:
                    raise InstallError(f"--cache {target.parent.parent}: {target.name}: over "
                                       f"{MAX_FILE >> 30} GiB: not the lock's file")  # fmt: skip
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != pkg.sha256:
            raise InstallError(f"--cache {target.parent.parent}: {target.name}: sha256 "
                               f"{digest.hexdigest()} is not the lock's {pkg.sha256}")  # fmt: skip
        os.replace(tmp, target)
    except (OSError, urllib.error.URLError, ValueError) as exc:
        why = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or type(exc).__name__
        raise InstallError(f"--cache {target.parent.parent}: {target.name}: could not download "
                           f"it from the lock's URL ({why})") from None  # fmt: skip
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def fill(packages: Sequence[LockedPackage], shared: Path) -> int:
    """``shared/pip/`` holds each pip entry it can keep afterwards (downloaded unless a file
    with the lock's sha256 is there); how many it holds."""
    folder = shared / SUBDIR
    folder.mkdir(exist_ok=True)
    held = 0
    for pkg in packages:
        name = file_name(pkg)
        if name is None:
            continue
        target = folder / name
        if target.is_symlink() or not target.is_file() or _sha256(target) != pkg.sha256:
            _download(pkg, target)
        held += 1
    return held


@dataclass(frozen=True)
class Taken:
    """Where an install's pip files come from."""

    shared: int = 0  # the cache's file, its sha256 the lock's
    fetched: int = 0  # the lock's URL
    refused: int = 0  # of those, the cache's file was not the lock's


def taken(
    packages: Sequence[LockedPackage], shared: Path | None
) -> tuple[list[LockedPackage], Taken]:
    """Each pip entry with the URL the install uses: the cache's file where its sha256 is the
    lock's, else the lock's own URL."""
    out, counts = [], Taken()
    for pkg in packages:
        name = file_name(pkg) if shared is not None else None
        path = shared / SUBDIR / name if shared is not None and name is not None else None
        if path is not None and path.is_file() and not path.is_symlink():
            if _sha256(path) == pkg.sha256:
                out.append(replace(pkg, url=path.absolute().as_uri()))
                counts = replace(counts, shared=counts.shared + 1)
                continue
            counts = replace(counts, refused=counts.refused + 1)
        out.append(pkg)
        counts = replace(counts, fetched=counts.fetched + 1)
    return out, counts


def paths(packages: Sequence[Pinned], shared: Path) -> list[tuple[Path, str]]:
    """What ``--push`` sends beside the conda packages: each pip file the cache holds, and
    its name in the tar (``pkgs/pip/FILE``)."""
    out = []
    for pkg in packages:
        name = file_name(pkg)
        if name is not None and (shared / SUBDIR / name).is_file():
            out.append((shared / SUBDIR / name, f"pkgs/{SUBDIR}/{name}"))
    return out
