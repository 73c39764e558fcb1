"""What this interpreter really loads: itself, torch, and the libraries locked packages ship.

Part of the facts probe, run with the environment's own python after ``import torch``:
the interpreter (version, executable, ``sys.prefix``, user site, ``sys.path``), where torch
was imported from, each libtorch/libc10, cuBLAS, cuDNN (and its parts), NCCL and CUDA runtime
library mapped into the process (``/proc/self/maps``) with the version the library itself
reports, and the NCCL network plugins where NCCL's ``dlopen`` looks for them. Nothing is
judged here: envtool compares it with the lock.
Python 3.9, standard library only (torch is read from ``sys.modules``, never imported).
"""

from __future__ import annotations

import ctypes
import os
import platform
import site
import sys

from . import netplugins

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# a CUDA torch maps about 25 of these (libtorch 5, libc10 2, cuBLAS 2, cuDNN 8, ...)
MAX_PATH_ENTRIES, MAX_MAPPED = 100, 64
MAX_MAPS = 16 * 2**20  # /proc/self/maps read at most this far

# kind → how its file name starts (``libcudnn.so.9`` is cuDNN; ``libcudnn_ops.so.9`` a part)
LIBRARIES = (
    ("nccl", "libnccl.so"),
    ("nccl-net", "libnccl-net"),
    ("cudart", "libcudart.so"),
    ("cudnn", "libcudnn.so"),
    ("cudnn-part", "libcudnn_"),
    ("cublas", "libcublas.so"),
    ("cublaslt", "libcublasLt.so"),
    ("libtorch", "libtorch.so"),
    ("libtorch", "libtorch_"),  # libtorch_cpu/_cuda/_python/_global_deps, not libtorchaudio
    ("libc10", "libc10.so"),
    ("libc10", "libc10_"),
)
# kind → the function that says the library's version: libraryPropertyType 0/1/2, int*
PROPERTIES = {"cublas": "cublasGetProperty", "cublaslt": "cublasLtGetProperty"}


def library_kind(path: str) -> str | None:
    """The kind of a mapped file, by its name; None for any other file."""
    name = os.path.basename(path)
    if ".so" not in name:
        return None
    for kind, start in LIBRARIES:
        if name.startswith(start):
            return kind
    return None


def mapped(maps: str) -> list[tuple[str, str]]:
    """(kind, path) of each library of ``LIBRARIES`` in a ``/proc/PID/maps`` text, each path
    once, in the order the loader mapped them."""
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


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _own(lib: Any, name: str, path: str) -> Any:
    """The function ``name`` when ``path`` itself defines it: dlsym also searches what a
    library needs (cuDNN 9's parts find libcudnn_graph's cudnnGetVersion), whose version
    is not the part's. AttributeError when another file answers."""
    function = getattr(lib, name)
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except (OSError, AttributeError):
        return function  # no dladdr to ask: the symbol as dlsym found it
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    info = _DlInfo()
    found = dladdr(ctypes.cast(function, ctypes.c_void_p), ctypes.byref(info))
    where = os.fsdecode(info.dli_fname) if found and info.dli_fname else path
    if os.path.realpath(where) != os.path.realpath(path):
        raise AttributeError(name)
    return function


def _property_version(function: Any) -> str | None:
    """``major.minor.patch`` from a ``GetProperty(libraryPropertyType, int*)`` function."""
    function.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
    parts = []
    for prop in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        out = ctypes.c_int(0)
        if function(prop, ctypes.byref(out)) != 0:
            return None
        parts.append(out.value)
    return "%d.%d.%d" % tuple(parts)


def library_version(kind: str, path: str) -> str | None:
    """The version the mapped library reports about itself; None when it cannot say
    (libtorch and libc10 have no such function)."""
    try:
        lib = _loaded(path)
        if kind in ("cudnn", "cudnn-part"):
            function = _own(lib, "cudnnGetVersion", path)
            function.restype = ctypes.c_size_t
            return cudnn_version(int(function()))
        if kind in PROPERTIES:
            return _property_version(_own(lib, PROPERTIES[kind], path))
        out = ctypes.c_int(0)
        if kind == "nccl" and _own(lib, "ncclGetVersion", path)(ctypes.byref(out)) == 0:
            return nccl_version(out.value)
        if kind == "cudart" and lib.cudaRuntimeGetVersion(ctypes.byref(out)) == 0:
            return cudart_version(out.value)
    except (OSError, AttributeError, ValueError):
        pass
    return None


def prefix_link(path: str, prefix: str, folders: tuple[str, ...] = ()) -> str | None:
    """The file of ``prefix`` (its lib, lib64, and ``folders``: torch's lib) that is a link to
    the mapped ``path`` (maps shows real paths: a prefix conda installed with softlinks into
    its package cache maps the cache's files)."""
    for folder in (os.path.join(prefix, "lib"), os.path.join(prefix, "lib64"), *folders):
        candidate = os.path.join(folder, os.path.basename(path))
        if os.path.islink(candidate) and os.path.realpath(candidate) == path:
            return candidate
    return None


def _torch_lib() -> tuple[str, ...]:
    """torch's own library folder (libtorch, libc10), as imported: not resolved."""
    where = str(getattr(sys.modules.get("torch"), "__file__", "") or "")
    return (os.path.join(os.path.dirname(os.path.abspath(where)), "lib"),) if where else ()


def _libraries(maps: list[tuple[str, str]]) -> list[dict[str, Any]]:
    torch_lib = _torch_lib()
    return [
        {
            "kind": kind,
            "path": path,
            "version": library_version(kind, path),
            "linked_from": prefix_link(path, sys.prefix, torch_lib),
        }
        for kind, path in maps
    ]


def _maps() -> list[tuple[str, str]]:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            return mapped(fh.read(MAX_MAPS))
    except OSError:
        return []


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
    maps = _maps()
    nccl = [p for kind, p in maps if kind == "nccl"]
    return {
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "sys_prefix": sys.prefix,
        "real_prefix": os.path.realpath(sys.prefix),  # /proc/self/maps shows real paths
        "user_site": site.getusersitepackages() if user_site else None,
        "path": path[:MAX_PATH_ENTRIES],
        "torch": _torch(path),
        "libraries": _libraries(maps),
        "net_plugins": netplugins.search(dict(os.environ), nccl, sys.prefix),
    }
