"""Advisory file locks (``flock``) for the read-modify-write of a lockfile and for one
install into a prefix at a time. The lock file lies beside the thing it guards and records
the holder's pid, so the message can name who holds it."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from envtool.errors import InstallError


def lock_path(guarded: Path, purpose: str) -> Path:
    """``dir/.NAME.envtool-PURPOSE.lock`` beside ``guarded``."""
    return guarded.parent / f".{guarded.name}.envtool-{purpose}.lock"


def _open_locked(path: Path, wait: bool, busy: str) -> int:
    """The lock file's fd, flock held. A holder removes the file when it is done, so a waiter
    that locked a file no longer at ``path`` (the inodes differ) opens the new one again:
    two holders can never each think they hold the lock."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise InstallError(f"{busy} (pid {holder}); wait for it, then run again") from None
        try:
            same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # its holder removed it while we waited: lock the current one


@contextlib.contextmanager
def held(guarded: Path, purpose: str, *, wait: bool, busy: str = "") -> Iterator[None]:
    """Hold the lock for the block; ``wait`` blocks until it is free, else a held lock is an
    InstallError: ``busy``, then the holder's pid. The lock file is removed when the block
    ends (nothing is left beside the guarded file)."""
    path = lock_path(guarded, purpose)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _open_locked(path, wait, busy)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()  # still held: a waiter that locks the old file sees it is gone
        os.close(fd)  # closing releases the lock
