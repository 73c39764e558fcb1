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


@contextlib.contextmanager
def held(guarded: Path, purpose: str, *, wait: bool, busy: str = "") -> Iterator[None]:
    """Hold the lock for the block; ``wait`` blocks until it is free, else a held lock is an
    InstallError: ``busy``, then the holder's pid."""
    path = lock_path(guarded, purpose)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise InstallError(f"{busy} (pid {holder}); wait for it, then run again") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock
