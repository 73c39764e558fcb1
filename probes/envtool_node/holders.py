"""Which processes may hold a folder (a prefix's generation, envtool_node/generations.py):
those whose ``/proc/PID/maps``, exe or cwd is inside it; and, of the processes this user
cannot read (another user's), those whose uid and groups could reach it through its folders'
modes, so a generation they may map is never removed unseen. The standard library alone
(Python 3.9)."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path


def _pids(proc: Path) -> Iterator[Path]:
    try:
        entries = list(proc.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.name.isdigit():
            yield entry


def _ids(entry: Path) -> tuple[int, set[int]] | None:
    """A process's filesystem uid and groups, from its ``status`` (which every user may
    read); None when it says none."""
    try:
        with open(entry / "status", encoding="utf-8", errors="replace") as fh:
            lines = fh.read(1 << 16).splitlines()
    except OSError:
        return None
    uid, gids = None, set()
    try:
        for line in lines:
            if line.startswith("Uid:"):
                uid = int(line.split()[4])  # real, effective, saved, filesystem
            elif line.startswith("Gid:"):
                gids.add(int(line.split()[4]))
            elif line.startswith("Groups:"):
                gids.update(int(g) for g in line.split()[1:])
    except (IndexError, ValueError):
        return None
    return (uid, gids) if uid is not None else None


def _has_acl(path: Path) -> bool:
    try:
        return "system.posix_acl_access" in os.listxattr(path)
    except OSError as exc:  # a filesystem without extended attributes has no ACL either
        return exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP)


def can_reach(folder: Path, uid: int, gids: set[int]) -> bool:
    """Whether a process of ``uid`` (with ``gids``) may search every folder from ``/`` down
    to ``folder``, and so open a file in it: by each folder's owner, group and mode bits; a
    folder with an ACL, or one that cannot be read, counts as reachable (not decided here)."""
    if uid == 0:
        return True
    path = folder.resolve()
    for part in [*reversed(path.parents), path]:
        try:
            st = os.stat(part)
        except OSError:
            return True
        if _has_acl(part):
            return True
        bit = stat.S_IXUSR if st.st_uid == uid else stat.S_IXGRP if st.st_gid in gids else (
            stat.S_IXOTH)  # fmt: skip
        if not st.st_mode & bit:
            return False
    return True


def holders(
    folder: Path, proc: Path = Path("/proc"), skip: int = -1
) -> tuple[list[int], int, list[int]]:
    """The processes that map a file under ``folder`` or run or stand in it; how many
    processes could not be read (another user's, without the right to); and of those, the
    ones of another user than root that could reach ``folder`` (their uid and groups against
    its folders' modes): what may hold it unseen. Root's processes, which a user cannot read
    (the system's daemons, kernel threads: dozens on any node), are counted, not taken for
    holders, or no user's fix would ever prune; as root, every process is read, and one the
    kernel shows to no one (a sandbox's own init) is counted too. ``skip``: a pid not
    counted (a fix run by the python of the generation it replaces)."""
    inside = str(folder.resolve()) + "/"
    held, unread, unsure = [], 0, []
    root = os.geteuid() == 0
    for entry in _pids(proc):
        if entry.name == str(skip):
            continue
        try:
            links = [os.readlink(entry / "exe"), os.readlink(entry / "cwd")]
            with open(entry / "maps", encoding="utf-8", errors="replace") as fh:
                maps = [line.split(None, 5)[-1].strip() for line in fh if "/" in line]
        except FileNotFoundError:
            continue  # gone meanwhile
        except PermissionError:
            unread += 1
            ids = None if root else _ids(entry)
            if not root and (ids is None or (ids[0] != 0 and can_reach(folder, *ids))):
                unsure.append(int(entry.name))
            continue
        except OSError:
            continue
        if any((p + "/").startswith(inside) for p in links + maps):
            held.append(int(entry.name))
    return sorted(held), unread, sorted(unsure)
