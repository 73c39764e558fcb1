"""The builder's wheels, cached on this machine between builds and checked like a bundle dir.

The cache folder must be the user's and writable by nobody else; envtool records each
wheel's sha256 in ``SHA256SUMS`` beside the wheels when it writes them, and checks every
wheel against that record as it copies it into a build context. A wheel it did not record,
one whose sha256 differs, or a folder someone else could write is refused (exit 1) and never
installed: the builder runs whatever these wheels hold.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from envtool import private
from envtool.errors import EXIT_PROBLEMS, EnvtoolError

MANIFEST = "SHA256SUMS"
REQUIREMENTS = "requirements.txt"  # written into the context: the builder's pip checks it
_NAME = r"[A-Za-z0-9_.+-]+\.whl"
_LINE = re.compile(rf"([0-9a-f]{{64}})  ({_NAME})")
_MANIFEST_LIMIT = 1 << 16


class WheelCacheError(EnvtoolError):
    """The build's wheel cache is not the user's, others can write it, or it holds a wheel
    envtool did not record or whose sha256 differs (exit 1): nothing from it is installed."""

    exit_code = EXIT_PROBLEMS


def root() -> Path:
    """Where the wheel folders live: ``build-wheels`` in envtool's cache."""
    from envtool.lock.solve import default_cache_dir

    return default_cache_dir() / "build-wheels"


def _refuse(folder: Path, why: str) -> WheelCacheError:
    return WheelCacheError(
        f"wheel cache {folder}: {why}: refused, nothing from it is installed; remove "
        f"{folder} (envtool fetches the wheels again)"
    )


def _trusted(folder: Path) -> None:
    why = private.why_unsafe(folder)
    if why:
        raise _refuse(folder, why)
    if not folder.is_dir():
        raise _refuse(folder, "is not a folder")


def _record(folder: Path) -> None:
    """Write ``SHA256SUMS`` for the wheels envtool has just written into ``folder``."""
    wheels = [p for p in sorted(folder.iterdir()) if re.fullmatch(_NAME, p.name)]
    lines = [f"{_sha256(path)}  {path.name}\n" for path in wheels]
    (folder / MANIFEST).write_text("".join(lines), encoding="ascii")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def filled(folder: Path, fetch: Callable[[Path], None]) -> Path:
    """``folder`` under :func:`root`, made by ``fetch`` when missing: filled in a private temp
    folder, its wheels' sha256 recorded, then renamed into place."""
    parent = folder.parent
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _trusted(parent)
    if not folder.exists() and not folder.is_symlink():
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=parent))
        try:
            fetch(tmp)
            _record(tmp)
            tmp.rename(folder)
        except OSError:  # another build filled the cache meanwhile: its wheels are checked
            if not folder.is_dir():
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _manifest(folder: Path) -> dict[str, str]:
    path = folder / MANIFEST
    if private.why_unsafe(path) or not path.is_file():
        raise _refuse(folder, f"no {MANIFEST} envtool wrote (made by an older envtool?)")
    with path.open("rb") as fh:
        text = fh.read(_MANIFEST_LIMIT + 1).decode("ascii", errors="replace")
    recorded: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        m = _LINE.fullmatch(line)
        if not m or len(text) > _MANIFEST_LIMIT:
            raise _refuse(folder, f"{MANIFEST}:{number} is not '<sha256>  <name>.whl'")
        recorded[m.group(2)] = m.group(1)
    return recorded


def _copy_hashing(source: Path, target: Path) -> str:
    """Copy a regular file (never through a link) and return the sha256 of what was copied."""
    digest = hashlib.sha256()
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as src, target.open("xb") as dst:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _refuse(source.parent, f"{source.name} is not a regular file")
        for chunk in iter(lambda: src.read(1 << 20), b""):
            digest.update(chunk)
            dst.write(chunk)
    return digest.hexdigest()


def copy_checked(folder: Path, into: Path, installed_from: str) -> tuple[str, ...]:
    """Copy the wheels envtool recorded in ``folder`` into ``into``, each checked against its
    recorded sha256 as it is copied, and write the builder's ``requirements.txt`` (each wheel
    at ``installed_from``/NAME with its ``--hash``); the wheels' names. WheelCacheError for
    a folder others can write, a wheel not recorded, missing, or whose sha256 differs."""
    _trusted(folder.parent)
    _trusted(folder)
    recorded = _manifest(folder)
    unknown = sorted(set(os.listdir(folder)) - set(recorded) - {MANIFEST})
    if unknown:
        raise _refuse(folder, f"{unknown[0]!r} is not a wheel envtool recorded in {MANIFEST}")
    if not recorded:
        raise _refuse(folder, f"{MANIFEST} records no wheel")
    for name, want in sorted(recorded.items()):
        try:
            got = _copy_hashing(folder / name, into / name)
        except FileNotFoundError:
            raise _refuse(folder, f"{name} is recorded but missing") from None
        except OSError as exc:
            raise _refuse(folder, f"{name}: {exc.strerror}") from None
        if got != want:
            raise _refuse(
                folder, f"{name}: its sha256 is {got[:16]}..., envtool recorded {want[:16]}..."
            )
    (into / REQUIREMENTS).write_text(
        "".join(f"{installed_from}/{n} --hash=sha256:{h}\n" for n, h in sorted(recorded.items())),
        encoding="ascii",
    )
    return tuple(sorted(recorded))
