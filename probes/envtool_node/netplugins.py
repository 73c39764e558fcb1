"""Where NCCL would find its network plugin: each ``libnccl-net*.so`` where its ``dlopen``
looks, with where it was found.

NCCL dlopens ``libnccl-net.so`` (``libnccl-net-<NCCL_NET_PLUGIN>.so`` when that is set) by
name, so the loader searches ``LD_LIBRARY_PATH``, the RUNPATH of the library that calls it
(libnccl's ``$ORIGIN``: its own folder; a conda libnccl's is PREFIX/lib), the ld.so cache,
then the system folders. Every read is bounded. Python 3.9, standard library only.
"""

from __future__ import annotations

import os

MAX_PLUGINS = 16
MAX_CACHE = 8 * 2**20  # /etc/ld.so.cache read at most this far (a few hundred KB in practice)
MAX_FOLDERS, MAX_LISTED = 64, 20_000  # plugin folders searched; entries read per folder
LD_CACHE = "/etc/ld.so.cache"
DEFAULT_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64")  # ld.so's own, after its cache


def _is_plugin(name: str) -> bool:
    """A name NCCL dlopens: ``libnccl-net.so``, ``libnccl-net-<NCCL_NET_PLUGIN>.so``."""
    return name.startswith("libnccl-net") and name.endswith(".so")


def cached_plugins(data: bytes) -> list[str]:
    """The ``libnccl-net*.so`` paths an ``ld.so.cache`` (either format) lists: its string
    table holds each library's full path, NUL-terminated."""
    if not data.startswith((b"ld.so-1.7.0", b"glibc-ld.so.cache")):
        return []
    paths: list[str] = []
    for raw in data.split(b"\0"):
        if raw.startswith(b"/") and b"libnccl-net" in raw and len(paths) < MAX_PLUGINS:
            path = os.fsdecode(raw)
            if _is_plugin(os.path.basename(path)) and path not in paths:
                paths.append(path)
    return paths


def _read_cache(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(MAX_CACHE)
    except OSError:
        return b""


def _listed(folder: str) -> list[str]:
    """The plugin files in ``folder``, by name (at most MAX_LISTED entries read)."""
    names: list[str] = []
    try:
        with os.scandir(folder) as entries:
            for i, entry in enumerate(entries):
                if i >= MAX_LISTED:
                    break
                if _is_plugin(entry.name):
                    names.append(entry.name)
    except OSError:
        return []
    return [os.path.join(folder, name) for name in sorted(names)]


def plugin_folders(environ: dict[str, str], nccl: list[str], prefix: str) -> list[tuple[str, str]]:
    """(folder, why) in the order NCCL's ``dlopen("libnccl-net.so")`` searches: the
    ``LD_LIBRARY_PATH`` folders, the RUNPATH ``$ORIGIN`` of the mapped libnccl (its own
    folder) and PREFIX/lib; the ld.so cache comes next (``cached_plugins``), then ``system``."""
    library_path = [f for f in environ.get("LD_LIBRARY_PATH", "").split(":") if os.path.isabs(f)]
    return [
        *((f, "LD_LIBRARY_PATH") for f in library_path[:MAX_FOLDERS]),
        *((os.path.dirname(p), "RUNPATH") for p in nccl[:MAX_FOLDERS]),
        (os.path.join(prefix, "lib"), "PREFIX/lib"),
    ]


def search(
    environ: dict[str, str], nccl: list[str], prefix: str, cache: str = LD_CACHE
) -> list[dict[str, str]]:
    """Each ``libnccl-net*.so`` where NCCL's ``dlopen`` looks (``plugin_folders``, the ld.so
    cache, the default folders), in search order, each file once, with where it was found."""
    out: dict[str, str] = {}
    seen: set[str] = set()

    def add(paths: list[str], why: str) -> None:
        for path in paths:
            if path not in out and len(out) < MAX_PLUGINS:
                out[path] = why

    for folder, why in plugin_folders(environ, nccl, prefix):
        if os.path.realpath(folder) not in seen:
            seen.add(os.path.realpath(folder))
            add(_listed(folder), why)
    add([p for p in cached_plugins(_read_cache(cache)) if os.path.isfile(p)], "ld.so.cache")
    for folder in DEFAULT_DIRS:
        if os.path.realpath(folder) not in seen:
            seen.add(os.path.realpath(folder))
            add(_listed(folder), "system")
    return [{"path": path, "found": why} for path, why in out.items()]
