"""Writing a node's temporary folder: the files envtool makes (kernel.log, preflight.json,
collect.json) and the job's files copied in, each opened without following a symlink
(``O_NOFOLLOW``, and ``O_NONBLOCK``: a FIFO never blocks the copy), checked again on the
descriptor (a regular file, the job's user's, within the bounds), its sha256 taken while it is
copied; every file 0600 and every folder 0700, the job's user's. A dump is copied as bytes,
never unpickled."""

from __future__ import annotations

import errno
import hashlib
import os

from envtool.gather.find import refusal
from envtool.gather.folder import DIR_FLAGS
from envtool.gather.names import Owner
from envtool.gather.plan import Limits, Take
from envtool.protocol.collect_record import CollectedFile, LeftOut

CHUNK = 1024 * 1024
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class HostFolder:
    """The temporary host folder being filled, through its descriptor (and its sub-folders')."""

    def __init__(self, fd: int, owner: Owner, limits: Limits) -> None:
        self.fd, self.owner, self.limits = fd, owner, limits
        self.subs: dict[str, int] = {}
        self.used = 0  # bytes written so far
        try:
            self._own(fd)
        except BaseException:
            os.close(fd)
            raise

    def _own(self, fd: int) -> None:
        if self.owner.chown:
            os.fchown(fd, self.owner.uid, self.owner.gid)

    def _parent(self, rel: str) -> tuple[int, str]:
        folder, _, name = rel.rpartition("/")
        if not folder:
            return self.fd, name
        if folder not in self.subs:
            os.mkdir(folder, 0o700, dir_fd=self.fd)
            self.subs[folder] = os.open(folder, DIR_FLAGS, dir_fd=self.fd)
            self._own(self.subs[folder])
        return self.subs[folder], name

    def _create(self, rel: str) -> int:
        parent, name = self._parent(rel)
        fd = os.open(name, NEW_FILE, 0o600, dir_fd=parent)
        self._own(fd)
        return fd

    def write(self, rel: str, data: bytes, origin: str, kind: str) -> CollectedFile:
        """A file envtool made, written whole."""
        fd = self._create(rel)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        self.used += len(data)
        return CollectedFile(rel, origin, len(data), hashlib.sha256(data).hexdigest(), kind)

    def copy(self, take: Take) -> CollectedFile | LeftOut:
        """The job's file copied in, or why it was left out after all."""
        try:
            src = os.open(take.origin, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            loop = exc.errno == errno.ELOOP
            return LeftOut(take.origin, "a symlink (never followed)" if loop else
                           f"cannot be read: {exc.strerror}")  # fmt: skip
        try:
            return self._copy_open(src, take)
        finally:
            os.close(src)

    def _copy_open(self, src: int, take: Take) -> CollectedFile | LeftOut:
        st = os.fstat(src)
        why = refusal(st, self.owner.uid)
        if why is not None:
            return LeftOut(take.origin, why)
        bound = min(self.limits.file_bytes, self.limits.node_bytes - self.used)
        digest, size = hashlib.sha256(), 0
        dst = self._create(take.rel)
        try:
            while chunk := os.read(src, CHUNK):
                size += len(chunk)
                if size > bound:
                    break
                digest.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(dst, view) :]
        finally:
            os.close(dst)
        if size > bound:
            parent, name = self._parent(take.rel)
            os.unlink(name, dir_fd=parent)
            return LeftOut(take.origin, f"grew past the {bound:,} bytes left for it while copied")
        self.used += size
        return CollectedFile(take.rel, take.origin, size, digest.hexdigest(), take.kind)

    def close(self) -> None:
        for fd in self.subs.values():
            os.close(fd)
        self.subs = {}
        os.close(self.fd)
