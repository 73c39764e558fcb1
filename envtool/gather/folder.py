"""The folders on the shared path: ``DEST/JOBID`` (mode 0700, the job's user's) and each
node's ``HOST`` in it, built as ``.HOST.tmp-PID`` and renamed into place. Every step goes
through a folder's descriptor, never a path walked again: DEST/JOBID is its user's to change,
so a name in it may be swapped for a symlink at any moment, and none is ever followed."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from pathlib import Path

from envtool.errors import InputError
from envtool.gather.names import Owner

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
RENAME_EXCHANGE = 2  # renameat2(2)


def _dest(dest: Path) -> int:
    try:
        return os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(
            f"{dest}: no such folder (make it once, on a path every node shares)"
        ) from None
    except NotADirectoryError:
        raise InputError(f"{dest}: not a folder") from None
    except OSError as exc:
        raise InputError(f"{dest}: cannot open: {exc.strerror}") from None


def job_folder(dest: Path, job_id: str, owner: Owner) -> int:
    """The descriptor of DEST/JOBID, made (0700, the job's user's) when missing; InputError
    when DEST is missing or not writable, or JOBID there is a symlink, not a folder, or
    another user's."""
    parent = _dest(dest)
    where = dest / job_id
    try:
        try:
            os.mkdir(job_id, 0o700, dir_fd=parent)
        except FileExistsError:
            pass  # another node made it first, or an earlier run
        except OSError as exc:
            raise InputError(f"{dest}: cannot make {job_id} there: {exc.strerror}") from None
        try:
            fd = os.open(job_id, DIR_FLAGS, dir_fd=parent)
        except OSError as exc:
            said = "a symlink or not a folder" if exc.errno in (errno.ELOOP, errno.ENOTDIR) else \
                exc.strerror  # fmt: skip
            raise InputError(f"{where}: {said}") from None
    finally:
        os.close(parent)
    try:
        _own(fd, where, owner)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _own(fd: int, where: Path, owner: Owner) -> None:
    if owner.chown and os.fstat(fd).st_uid == 0 and not os.listdir(fd):
        os.fchown(fd, owner.uid, owner.gid)  # root made it just now (or left it empty)
    st = os.fstat(fd)  # again: another node's root may have given it away meanwhile
    if st.st_uid != owner.uid:
        raise InputError(f"{where}: owned by uid {st.st_uid}, not the job's user "
                         f"({owner.user}, uid {owner.uid}): not written into")  # fmt: skip
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.fchmod(fd, 0o700)


def temp_folder(job_fd: int, host: str) -> tuple[str, int]:
    """A new ``.HOST.tmp-PID`` in the job's folder (0700), its name and descriptor."""
    name = f".{host}.tmp-{os.getpid()}"
    remove_tree(job_fd, name)  # a run of the same pid that died here
    os.mkdir(name, 0o700, dir_fd=job_fd)
    return name, os.open(name, DIR_FLAGS, dir_fd=job_fd)


def remove_tree(parent_fd: int, name: str) -> None:
    """Remove ``name`` under ``parent_fd`` and all it holds (symlinks as links, never
    followed); nothing when it is not there."""
    try:
        fd = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        os.unlink(name, dir_fd=parent_fd)  # a file or a symlink: the name alone
        return
    try:
        for entry in os.listdir(fd):
            remove_tree(fd, entry)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent_fd)


def _exchange(fd: int, a: str, b: str) -> bool:
    """Swap two names atomically (renameat2 RENAME_EXCHANGE); False where the C library or
    the filesystem (NFS) cannot."""
    libc = ctypes.CDLL(None, use_errno=True)
    call = getattr(libc, "renameat2", None)
    if call is None:
        return False
    if call(fd, a.encode(), fd, b.encode(), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(code, os.strerror(code), b)


def put_in_place(job_fd: int, temp: str, host: str) -> str:
    """Rename ``temp`` to ``host``: a first run's plain rename(2); over an earlier run's
    folder, an atomic exchange and the old one removed; where the filesystem has no exchange,
    the old one moved aside first (a reader then finds no HOST for a moment, never half of
    one). Returns how: "new", "replaced" or "replaced, moved aside"."""
    try:
        os.rename(temp, host, src_dir_fd=job_fd, dst_dir_fd=job_fd)
        return "new"
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            raise
    if _exchange(job_fd, temp, host):
        remove_tree(job_fd, temp)  # the earlier run's folder, now under the temporary name
        return "replaced"
    aside = f".{host}.old-{os.getpid()}"
    remove_tree(job_fd, aside)
    os.rename(host, aside, src_dir_fd=job_fd, dst_dir_fd=job_fd)
    os.rename(temp, host, src_dir_fd=job_fd, dst_dir_fd=job_fd)
    with contextlib.suppress(OSError):
        remove_tree(job_fd, aside)
    return "replaced, moved aside"
