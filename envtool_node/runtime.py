"""What this interpreter really loads: itself, torch, and the NCCL/CUDA/cuDNN libraries.

Part of the facts probe, run with the environment's own python after ``import torch``:
the interpreter (version, executable, ``sys.prefix``, user site, ``sys.path``), where torch
was imported from, each ``libnccl``/``libcudart``/``libcudnn`` mapped into the process
(``/proc/self/maps``) with the version the library itself reports, and the NCCL network
plugins on the library path. Nothing is judged here: envtool compares it with the lock.
Python 3.9, standard library only (torch is read from ``sys.modules``, never imported).
"""

from __future__ import annotations

import ctypes
import os
import platform
import site
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_PATH_ENTRIES, MAX_MAPPED, MAX_PLUGINS = 100, 16, 16
MAX_MAPS = 16 * 2**20  # /proc/self/maps read at most this far

# kind → how its file name starts (``libcudnn.so.9`` is cuDNN; ``libcudnn_ops.so.9`` a part)
LIBRARIES = (
    ("nccl", "libnccl.so"),
    ("nccl-net", "libnccl-net"),
    ("cudart", "libcudart.so"),
    ("cudnn", "libcudnn.so"),
)


def library_kind(path: str) -> str | None:
    """The kind of a mapped file, by its name; None for any other file."""
    name = os.path.basename(path)
    for kind, start in LIBRARIES:
        if name.startswith(start):
            return kind
    return None


def mapped(maps: str) -> list[tuple[str, str]]:
    """(kind, path) of each NCCL/CUDA runtime/cuDNN library in a ``/proc/PID/maps`` text,
    each path once, in the order the loader mapped them."""
    seen: dict[str, str] = {}
    for line in maps.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 6 or not fields[5].startswith("/"):
            continue
        path = fields[5].strip()
        if path.endswith(" (deleted)"):
            path = path[: -len(" (deleted)")]
        kind = library_kind(path)
        if kind is not None and path not in seen and len(seen) < MAX_MAPPED:
            seen[path] = kind
    return [(kind, path) for path, kind in seen.items()]


def nccl_version(code: int) -> str:
    """NCCL_VERSION_CODE as text: major*10000 + minor*100 + patch from 2.9 on (21803 is
    2.18.3), major*1000 + minor*100 + patch before (2708 is 2.7.8)."""
    if code >= 20900:
        return "%d.%d.%d" % (code // 10000, code // 100 % 100, code % 100)
    return "%d.%d.%d" % (code // 1000, code // 100 % 10, code % 100)


def cudnn_version(code: int) -> str:
    """CUDNN_VERSION as text: major*10000 + minor*100 + patch from cuDNN 9 (91900 is 9.19.0),
    major*1000 + minor*100 + patch before (8907 is 8.9.7)."""
    if code >= 90000:
        return "%d.%d.%d" % (code // 10000, code // 100 % 100, code % 100)
    return "%d.%d.%d" % (code // 1000, code // 100 % 10, code % 100)


def cudart_version(code: int) -> str:
    """cudaRuntimeGetVersion's 11080 as ``11.8``."""
    return "%d.%d" % (code // 1000, code % 1000 // 10)


def _loaded(path: str) -> Any:
    """The handle of a library already in the process (RTLD_NOLOAD: never loads one)."""
    return ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)


def library_version(kind: str, path: str) -> str | None:
    """The version the mapped library reports about itself; None when it cannot say."""
    try:
        lib = _loaded(path)
        if kind == "cudnn":
            lib.cudnnGetVersion.restype = ctypes.c_size_t
            return cudnn_version(int(lib.cudnnGetVersion()))
        out = ctypes.c_int(0)
        if kind == "nccl" and lib.ncclGetVersion(ctypes.byref(out)) == 0:
            return nccl_version(out.value)
        if kind == "cudart" and lib.cudaRuntimeGetVersion(ctypes.byref(out)) == 0:
            return cudart_version(out.value)
    except (OSError, AttributeError, ValueError):
        pass
    return None


def prefix_link(path: str, prefix: str) -> str | None:
    """The file of ``prefix`` that is a link to the mapped ``path`` (maps shows real paths: a
    prefix conda installed with softlinks into its package cache maps the cache's files)."""
    for folder in ("lib", "lib64"):
        candidate = os.path.join(prefix, folder, os.path.basename(path))
        if os.path.islink(candidate) and os.path.realpath(candidate) == path:
            return candidate
    return None


def _libraries() -> list[dict[str, Any]]:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            text = fh.read(MAX_MAPS)
    except OSError:
        return []
    return [
        {
            "kind": kind,
            "path": path,
            "version": library_version(kind, path),
            "linked_from": prefix_link(path, sys.prefix),
        }
        for kind, path in mapped(text)
    ]


def net_plugins(environ: dict[str, str]) -> list[str]:
    """``libnccl-net*.so`` files in the ``LD_LIBRARY_PATH`` directories (NCCL dlopens the
    first it finds), in search order."""
    found: list[str] = []
    for folder in environ.get("LD_LIBRARY_PATH", "").split(":"):
        if not folder or not os.path.isabs(folder):
            continue
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if name.startswith("libnccl-net") and ".so" in name and len(found) < MAX_PLUGINS:
                found.append(os.path.join(folder, name))
    return found


def _entry_of(directory: str, path: list[str]) -> str | None:
    """The ``sys.path`` entry ``directory`` was found under (the longest that contains it)."""
    best = None
    for entry in path:
        holds = entry and (directory == entry or directory.startswith(entry.rstrip("/") + "/"))
        if holds and (best is None or len(entry) > len(best)):
            best = entry
    return best


def _torch(path: list[str]) -> dict[str, Any] | None:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    where = os.path.abspath(str(getattr(torch, "__file__", "") or ""))
    version = getattr(torch, "version", None)
    return {
        "file": where,
        "real_file": os.path.realpath(where),
        "entry": _entry_of(os.path.dirname(os.path.dirname(where)), path),
        "git_version": str(getattr(version, "git_version", "") or "") or None,
    }


def _bundle_root() -> str:
    """The private folder envtool runs this package from: on sys.path, but not the node's."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def collect() -> dict[str, Any]:
    """The runtime part of the facts document."""
    bundle = _bundle_root()
    path = [os.path.abspath(p) for p in sys.path if p and os.path.abspath(p) != bundle]
    user_site = site.ENABLE_USER_SITE is True
    return {
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "sys_prefix": sys.prefix,
        "real_prefix": os.path.realpath(sys.prefix),  # /proc/self/maps shows real paths
        "user_site": site.getusersitepackages() if user_site else None,
        "path": path[:MAX_PATH_ENTRIES],
        "torch": _torch(path),
        "libraries": _libraries(),
        "net_plugins": net_plugins(dict(os.environ)),
    }
