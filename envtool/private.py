"""Folders envtool runs code from or writes into: its own, and only writable by its user.

A temp dir is made only under a TMPDIR that no other user can swap it out of (not writable
by others, or sticky like /tmp); a folder envtool is pointed at (``--bundle-dir``) must be
owned by the user and not writable by group or others, and hold nothing but what envtool
puts there, before anything is written into it or run from it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from envtool.errors import InputError


def why_unsafe(path: Path) -> str:
    """Why another user could change what is in ``path`` ("" when none can)."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return ""
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if info.st_uid not in (os.getuid(), 0):
        return f"belongs to uid {info.st_uid}, not to you"
    if info.st_mode & 0o022:
        return "is writable by group or others"
    return ""


def checked_tmpdir() -> Path:
    """The temp folder, refused when others could swap a temp dir made in it."""
    root = Path(tempfile.gettempdir())
    info = root.stat()
    shared = info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX
    if shared or info.st_uid not in (os.getuid(), 0):
        raise InputError(
            f"TMPDIR {root} is writable by others and not sticky (or not yours): set TMPDIR "
            "to a folder only you can write (or one like /tmp, mode 1777)"
        )
    return root


@contextlib.contextmanager
def tempdir(prefix: str) -> Iterator[Path]:
    """A new folder only this user can enter (0700) in a checked TMPDIR, removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=checked_tmpdir()))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def own_folder(path: Path, allowed: set[str], what: str) -> None:
    """``path`` (made when missing) is the user's, not writable by others, and holds nothing
    but ``allowed`` entries; else an InputError saying why, before anything is written."""
    path.mkdir(parents=True, exist_ok=True, mode=0o755)
    why = why_unsafe(path)
    if why:
        raise InputError(f"{what} {path} {why}: envtool will not run code from it")
    others = sorted(entry.name for entry in os.scandir(path) if entry.name not in allowed)
    if others:
        raise InputError(
            f"{what} {path} holds other files ({', '.join(others[:3])}): python would import "
            "them before the node package's; use an empty folder"
        )


def private_folder(path: Path) -> None:
    """``path`` only its user can enter (0700): made so, or closed when it is this user's and
    others could read it (a cache holds the repodata of private channels)."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = path.stat()
        if info.st_uid == os.getuid() and info.st_mode & 0o077:
            path.chmod(0o700)
    except OSError as exc:
        raise InputError(f"{path}: cannot make it a private folder: {exc.strerror}") from None
