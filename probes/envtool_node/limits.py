"""The limits under the environment (envtool.limits/1): /dev/shm's size, the open-files and
locked-memory limits of this process (what the ranks it starts inherit), the kernel and the C
library. Python 3.9, standard library only; nothing here needs torch.
"""

from __future__ import annotations

import os
import platform
import resource

from . import schema
from .facts import glibc_version

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SHM = "/dev/shm"  # NCCL's SHM transport and DataLoader workers' tensors live here
UNLIMITED = -1  # RLIM_INFINITY, in the document


def shm_size(path: str = SHM) -> tuple[int | None, str | None]:
    """The size of the file system at ``path`` in bytes (its tmpfs ``size=``), or why not."""
    try:
        st = os.statvfs(path)
    except OSError as exc:
        return None, "%s: %s" % (path, exc.strerror or exc)
    return st.f_blocks * st.f_frsize, None


def limit(which: int) -> list[int]:
    """[soft, hard] of one resource limit, ``-1`` for unlimited."""
    pair = resource.getrlimit(which)
    return [UNLIMITED if v == resource.RLIM_INFINITY else int(v) for v in pair]


def collect(shm: str = SHM) -> dict[str, Any]:
    """The limits part of the node document."""
    size, error = shm_size(shm)
    return {
        "schema": schema.LIMITS,
        "shm_bytes": size,
        "shm_error": error,
        "nofile": limit(resource.RLIMIT_NOFILE),
        "memlock": limit(resource.RLIMIT_MEMLOCK),
        "kernel": platform.release(),
        "glibc": glibc_version(),
    }
