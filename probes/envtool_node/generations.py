"""A prefix's generations: ``P.envtool-gen-N`` beside ``P``, each a whole install of a lock
at its own final path (conda prefixes are not relocatable: a package's files carry the path
they were installed at), and ``P`` a symbolic link to the one in use, switched in one step.

- ``P`` a link: a new link made beside it and renamed over it (``rename(2)`` replaces it
  atomically: every ``open`` sees the old generation or the new, never nothing).
- ``P`` still a real directory (the first fix): it is exchanged with a link to the new
  generation by ``renameat2(RENAME_EXCHANGE)``, which leaves the old directory at
  ``P.envtool-gen-0`` in the same step. Its files carry ``P``, so it is valid only at ``P``:
  a rollback exchanges it back, a running job keeps its open files. A filesystem without
  RENAME_EXCHANGE (EINVAL: some network filesystems) is refused unless ``gap=True``: then
  ``P`` is renamed away and the link made, and between the two ``P`` is missing.

Which generations a running process holds is read from ``/proc/*/maps`` (and its exe and
cwd), and who else may hold one from the processes this user cannot read (holders.py):
one in use is never removed. ``proc`` is a parameter, as every reader's source is.

The standard library alone (Python 3.9): envtool's own fix (envtool/fix/) and a node that
fixes its prefix with micromamba, mamba or conda (fixgen.py) switch generations by the same
code, and so read each other's generations and markers.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from .holders import holders
from .schema import INCOMPLETE_MARKER
from .stamp import STAMP

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_SUFFIX = ".envtool-gen-"
PENDING = "conda-meta/envtool-fix-pending"  # in a generation from its start to its switch
PREVIOUS = "conda-meta/envtool-previous"  # the generation P was before it (a rollback's target)


class GenerationError(Exception):
    """A generation could not be made, switched or removed (envtool: an InstallError)."""


class Refused(GenerationError):
    """Not done, as asked (envtool: an InputError): a prefix another user could redirect, no
    generation to go back to."""


@dataclass(frozen=True)
class Generation:
    """One generation of a prefix."""

    number: int
    path: Path

    @property
    def original(self) -> bool:
        """Generation 0: the directory ``P`` was before its first fix (valid only at ``P``)."""
        return self.number == 0


def check_writable(prefix: Path) -> None:
    """``P`` and every folder above it are this user's or root's, and none can be written
    by another user (but a sticky folder): else a fix could be redirected (Refused)."""
    uid = os.geteuid()
    path = prefix.absolute()
    for folder in (path, *path.parents):
        try:
            st = folder.lstat()
        except FileNotFoundError:
            continue
        if folder == path and stat.S_ISLNK(st.st_mode):
            st = folder.parent.lstat()  # the link's own folder decides who can swap it
        if st.st_uid not in (0, uid):
            raise Refused(f"{prefix}: {folder} belongs to uid {st.st_uid}: not fixed")
        if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
            raise Refused(f"{prefix}: {folder} can be written by every user: not fixed")


def path_of(prefix: Path, number: int) -> Path:
    """``P.envtool-gen-N``."""
    return prefix.parent / f"{prefix.name}{_SUFFIX}{number}"


def generations(prefix: Path) -> list[Generation]:
    """The prefix's generations on disk, oldest first (links among them not counted)."""
    pattern = re.compile(re.escape(prefix.name + _SUFFIX) + r"(\d{1,6})")
    out = []
    try:
        names = os.listdir(prefix.parent)
    except OSError:
        return []
    for name in names:
        m = pattern.fullmatch(name)
        path = prefix.parent / name
        if m is not None and path.is_dir() and not path.is_symlink():
            out.append(Generation(int(m.group(1)), path))
    return sorted(out, key=lambda g: g.number)


def current(prefix: Path) -> Generation | None:
    """The generation ``P`` links to; None when ``P`` is a real directory (or absent).
    InstallError when ``P`` links anywhere else: not a prefix envtool switched."""
    if not prefix.is_symlink():
        return None
    target = os.readlink(prefix)
    for g in generations(prefix):
        if target == g.path.name:
            return g
    raise GenerationError(
        f"{prefix}: a symbolic link to {target!r}, not to one of its generations "
        f"({prefix.name}{_SUFFIX}N): envtool does not switch a link it did not make"
    )


def unfinished(g: Generation) -> bool:
    """Half-made (the install marker), never switched to (the pending marker), or a new
    generation an installer left without the stamp every finished one has."""
    marked = (g.path / INCOMPLETE_MARKER).exists() or (g.path / PENDING).exists()
    return marked or (not g.original and not (g.path / STAMP).exists())


def stale(prefix: Path, now: Generation | None) -> list[Path]:
    """Generations an interrupted run left (half-installed, or never switched to)."""
    return [g.path for g in generations(prefix) if g != now and unfinished(g)]


def previous(g: Generation | None, prefix: Path) -> Generation | None:
    """The generation ``P`` was before ``g`` (as ``g`` records it), where it is still there."""
    if g is None:
        return None
    try:
        with open(g.path / PREVIOUS, encoding="utf-8") as fh:
            name = fh.read(4096).strip()
    except OSError:
        return None
    return next((o for o in generations(prefix) if o.path.name == name), None)


def next_path(prefix: Path) -> Path:
    """Where the next generation is installed (a number above every one beside ``P``)."""
    numbers = [g.number for g in generations(prefix)]
    return path_of(prefix, max(numbers, default=0) + 1)


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def exchange(a: Path, b: Path) -> None:
    """Swap two paths in one step (``renameat2(RENAME_EXCHANGE)``); OSError as the kernel
    answers (EINVAL: the filesystem cannot)."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        raise OSError(errno.ENOSYS, "renameat2 is not in this C library")
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(a))


def switch(prefix: Path, target: Path, gap: bool = False) -> str:
    """Make ``P`` the generation at ``target`` in one step; how it was done."""
    link = prefix.parent / f".{prefix.name}.envtool-link-{os.getpid()}"
    if link.is_symlink():
        link.unlink()
    if prefix.is_symlink() or not prefix.exists():
        os.symlink(target.name, link)
        os.rename(link, prefix)  # replaces the old link atomically
        _sync_dir(prefix.parent)
        return "rename"
    original = path_of(prefix, 0)
    if original.exists() or original.is_symlink():
        raise GenerationError(f"{original}: exists, and {prefix} is still a directory: remove it")
    os.symlink(target.name, original)
    try:
        exchange(prefix, original)  # P: the link; P.envtool-gen-0: the old directory
    except OSError as exc:
        original.unlink()
        if exc.errno not in (errno.EINVAL, errno.ENOSYS) or not gap:
            raise GenerationError(
                f"{prefix}: cannot exchange it with its new generation in one step "
                f"(renameat2 RENAME_EXCHANGE: {exc.strerror}); nothing was switched. On this "
                "filesystem --allow-gap renames it away first (between the two steps "
                f"{prefix} is missing)"
            ) from None
        os.rename(prefix, original)  # --allow-gap: a moment without P
        os.symlink(target.name, prefix)
        _sync_dir(prefix.parent)
        return "rename with a gap"
    _sync_dir(prefix.parent)
    return "exchange"


def restore_original(prefix: Path) -> None:
    """Put generation 0 (the directory ``P`` was) back at ``P``, in one step."""
    original = path_of(prefix, 0)
    exchange(prefix, original)  # P: the directory again; gen-0: the link
    original.unlink()
    _sync_dir(prefix.parent)


def remove(path: Path, settle: float = 0.3, limit: float = 10.0) -> None:
    """Remove a generation (a half-made one too). An install that just failed may still have
    worker threads writing into it for a moment: removed until it stays gone ``settle``
    seconds (at most ``limit``)."""
    quiet_since: float | None = None
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if path.exists() or path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= settle:
            return
        time.sleep(0.05)
    if path.exists():
        raise GenerationError(f"{path}: could not be removed")


def prune(
    prefix: Path, keep: int, proc: Path = Path("/proc"), skip: int = -1
) -> tuple[list[str], list[tuple[str, tuple[int, ...]]], int]:
    """Older generations beyond ``keep`` removed, but one a process holds, or one a process
    this user cannot read could reach (``holders``): (removed, kept with those pids, how many
    processes could not be read). The one ``P`` was before is kept first: what a rollback
    goes back to."""
    now = current(prefix)
    before = previous(now, prefix)
    older = [g for g in reversed(generations(prefix)) if g not in (now, before)]
    older = [before, *older] if before is not None else older
    removed: list[str] = []
    kept: list[tuple[str, tuple[int, ...]]] = []
    unread = 0
    for g in older[keep:]:
        pids, unread_here, unsure = holders(g.path, proc, skip)
        unread = max(unread, unread_here)
        if pids or unsure:  # one this user cannot read, that can reach it: kept as held
            kept.append((g.path.name, tuple(sorted(pids + unsure))))
            continue
        remove(g.path)
        removed.append(g.path.name)
    return removed, kept, unread


def roll_back(prefix: Path) -> tuple[str, str] | None:
    """``P`` switched back to the generation before the one in use (generation 0, the
    directory it was, exchanged back into place): (the name ``P`` is now, how); None when
    ``P`` was never switched."""
    now = current(prefix)
    if now is None:
        return None
    back = previous(now, prefix)
    if back is None or unfinished(back):
        raise Refused(f"{prefix}: no generation before {now.path.name} is left")
    if back.original:
        restore_original(prefix)
        return prefix.name, "exchange"
    return back.path.name, switch(prefix, back.path)
