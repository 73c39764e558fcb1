"""The limits under the environment (envtool.limits/1): /dev/shm's size, the open-files and
locked-memory limits of this process (what the ranks it starts inherit), the kernel and the C
library. Python 3.9, standard library only; nothing here needs torch.
"""

from __future__ import annotations

import os
import platform
import resource
import time

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


def process_age(fallback: float) -> float:
    """Seconds since this process was exec'd (/proc/self/stat's start time against the boot
    clock): its interpreter's start counts too, a slow one (site-packages on a cold network
    filesystem, a sitecustomize) included. ``fallback`` (the seconds since main() began)
    where that cannot be read or is no more than it."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read(4096).decode("ascii", "replace")
        ticks = int(stat.rsplit(") ", 1)[1].split()[19])  # field 22, starttime
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return fallback
    return age if fallback <= age < fallback + 3600 else fallback
