"""Pure checks of what a node's interpreter really loads against the lock and the prefix.

The package records on disk say what was installed; the runtime facts (envtool_node/runtime)
say what a job will run: the interpreter, the torch it imports, the libraries mapped into
it (libtorch/libc10, cuBLAS, cuDNN and its parts, NCCL, the CUDA runtime). Each is compared
with the locked package (``runtime-differs``), and each loaded from outside the probed
prefix is named with the mechanism that put it there (``loaded-outside-prefix``, ``cause``).
One cause, one finding: a version that differs because the file came from elsewhere is
reported as the file from elsewhere, and torch from elsewhere explains the libtorch beside it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from envtool.judge.cuda import components, torch_build
from envtool.judge.findings import Finding, Kind
from envtool.judge.packages import by_key, effective
from envtool.judge.rules import severity
from envtool.models import Environment, Package
from envtool.protocol.types import HostReport, Library, NodeFacts, Runtime
from envtool_node.runtime import cudnn_version

# What loaded a file from outside the prefix (``Finding.cause``; labels say the fix).
INTERPRETER, PYTHONPATH, USER_SITE, SYS_PATH = "interpreter", "PYTHONPATH", "user-site", "sys.path"
LD_PRELOAD, LD_LIBRARY_PATH, LOADER = "LD_PRELOAD", "LD_LIBRARY_PATH", "loader"
PARTS = "parts"  # loaded-twice: cuDNN's parts from another install than its main library
NCCL = ("nccl", "nvidia-nccl-cu11", "nvidia-nccl-cu12", "nvidia-nccl-cu13")
CUDNN = ("cudnn", "nvidia-cudnn-cu11", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13")
CUBLAS = ("libcublas", "nvidia-cublas-cu11", "nvidia-cublas-cu12", "nvidia-cublas-cu13")
# library kind (envtool_node.runtime.LIBRARIES) → the subject its findings carry, and the
# lock keys that pin it
LIBRARIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "libtorch": ("libtorch", ("torch",)),
    "libc10": ("libc10", ("torch",)),
    "nccl": ("NCCL", NCCL),
    "cudart": ("CUDA runtime", ()),
    "cudnn": ("cuDNN", CUDNN),
    "cudnn-part": ("cuDNN", CUDNN),
    "cublas": ("cuBLAS", CUBLAS),
    "cublaslt": ("cuBLAS", CUBLAS),
}
TORCH_LIBRARIES = ("libtorch", "libc10")  # beside torch: a torch from elsewhere explains them
# a runtime subject → the subjects a file from outside the prefix already explains
EXPLAINS = {"python": ("python",), "torch": ("torch", "torch CUDA")}


@dataclass(frozen=True)
class Loaded:
    """One runtime value compared with the lock: the subject, what was loaded, the package
    locked for it (None: the lock is silent, not checked)."""

    subject: str
    value: str | None
    locked: Package | None
    expected: str | None


def locked(lock: Environment, keys: tuple[str, ...]) -> Package | None:
    """The lock's package for the first of ``keys`` it has (pip's copy over conda's)."""
    groups = by_key(lock.packages)
    for key in keys:
        if key in groups:
            return effective(groups[key])
    return None


def _first_version(rt: Runtime | None, kind: str) -> str | None:
    libs = rt.mapped(kind) if rt is not None else ()
    return next((lib.version for lib in libs if lib.version), None)


def _library_pin(lock: Environment, keys: tuple[str, ...], have: str | None) -> Package | None:
    """The locked package a loaded library is held to: the one of its version when the lock
    pins several (conda's nccl and a pip wheel's), else the first."""
    pins = [p for p in (locked(lock, (key,)) for key in keys) if p is not None]
    same = [p for p in pins if have and components(p.version, 3) == components(have, 3)]
    return next(iter(same or pins), None)


def compared(facts: NodeFacts, lock: Environment) -> list[Loaded]:
    """Each runtime value beside the lock's (pure)."""
    rt = facts.runtime
    python = locked(lock, ("python",))
    torch = locked(lock, ("torch",))
    out = [Loaded("python", facts.python or None, python, python.version if python else None)]
    out.append(Loaded("torch", facts.torch, torch, torch.version.split("+")[0] if torch else None))
    want_cuda = torch_build(torch) if torch is not None else None
    have_cuda = facts.cuda if facts.cuda else ("cpu" if facts.torch else None)
    out.append(Loaded("torch CUDA", have_cuda, torch if want_cuda else None, want_cuda))
    have_nccl = _first_version(rt, "nccl") or facts.nccl
    nccl = _library_pin(lock, LIBRARIES["nccl"][1], have_nccl)
    # a CPU torch loads no NCCL: nothing to compare (the torch CUDA line says why)
    expect_nccl = nccl if facts.cuda else None
    out.append(
        Loaded("NCCL", have_nccl, expect_nccl, components(nccl.version, 3) if nccl else None)
    )
    have_cudnn = _first_version(rt, "cudnn")
    if have_cudnn is None and facts.cudnn and facts.cudnn.isdigit():
        have_cudnn = cudnn_version(int(facts.cudnn))
    cudnn = _library_pin(lock, LIBRARIES["cudnn"][1], have_cudnn)
    expect_cudnn = cudnn if facts.cuda else None
    out.append(
        Loaded("cuDNN", have_cudnn, expect_cudnn, components(cudnn.version, 3) if cudnn else None)
    )
    # cuBLAS is mapped on first use: compared only where it is, never "not loaded"
    have_cublas = _first_version(rt, "cublas") or _first_version(rt, "cublaslt")
    cublas = _library_pin(lock, CUBLAS, have_cublas) if have_cublas else None
    want_cublas = components(cublas.version, 3) if cublas else None
    out.append(Loaded("cuBLAS", have_cublas, cublas if facts.cuda else None, want_cublas))
    return out


def _same(subject: str, have: str, want: str) -> bool:
    if subject == "torch":
        return have.split("+")[0] == want
    if subject in ("NCCL", "cuDNN", "cuBLAS"):
        return components(have, 3) == want
    return have == want


def against_lock(facts: NodeFacts, lock: Environment) -> list[Finding]:
    """``runtime-differs`` for each loaded value that is not the locked one."""
    out = []
    for item in compared(facts, lock):
        if item.locked is None or item.expected is None:
            continue
        have = item.value or ""  # "": not loaded at all (the words say so)
        if item.value is None or not _same(item.subject, item.value, item.expected):
            out.append(
                Finding(Kind.RUNTIME_DIFFERS, severity(Kind.RUNTIME_DIFFERS), item.subject,
                        item.expected, have, reference=item.locked.identity())
            )  # fmt: skip
    return out


def inside(path: str, roots: tuple[str, ...]) -> bool:
    """``path`` is one of ``roots`` or under one (paths as the node wrote them)."""
    path = os.path.normpath(path)
    for root in roots:
        root = os.path.normpath(root) if root else ""
        if root and (path == root or path.startswith(root.rstrip("/") + "/")):
            return True
    return False


def _folders(value: str, spaces: bool = False) -> list[str]:
    """The entries of a PATH-like variable (LD_PRELOAD also splits on spaces)."""
    parts = value.split() if spaces else [value]
    return [os.path.normpath(p) for part in parts for p in part.split(":") if p]


def _python_cause(rt: Runtime, env: dict[str, str]) -> str:
    entry = os.path.normpath(rt.torch_entry) if rt.torch_entry else ""
    if entry and entry in _folders(env.get("PYTHONPATH", "")):
        return PYTHONPATH
    if entry and rt.user_site and entry == os.path.normpath(rt.user_site):
        return USER_SITE
    return SYS_PATH


def _library_cause(path: str, env: dict[str, str]) -> str:
    if os.path.normpath(path) in _folders(env.get("LD_PRELOAD", ""), spaces=True):
        return LD_PRELOAD
    if os.path.dirname(os.path.normpath(path)) in _folders(env.get("LD_LIBRARY_PATH", "")):
        return LD_LIBRARY_PATH
    return LOADER


def _outside(subject: str, prefix: str, actual: str, cause: str) -> Finding:
    kind = Kind.LOADED_OUTSIDE
    return Finding(kind, severity(kind), subject, prefix, actual, cause=cause)


def _roots(rt: Runtime, prefix: str) -> tuple[str, ...]:
    """The folders whose files count as the prefix's own."""
    roots: tuple[str, ...] = (prefix,)
    if inside(rt.sys_prefix, roots):
        roots += (rt.real_prefix,)
    real_site = os.path.dirname(os.path.dirname(rt.torch_real_file or "/"))
    if rt.torch_file and inside(rt.torch_file, roots) and real_site != "/":
        # the prefix's torch is a link (conda softlinks, a linked checkout): the libraries
        # its RPATH names (site-packages/nvidia/...) sit beside where it really is
        roots += (real_site,)
    return roots


def _file(lib: Library) -> str:
    version = f" {lib.version}" if lib.version else ""
    return f"{os.path.basename(lib.path)}{version} at {os.path.dirname(lib.path)}"


def _stem(path: str) -> str:
    """A library's name without its version: ``libcudnn.so.9`` and ``libcudnn.so.8`` are one."""
    name = os.path.basename(path)
    return name[: name.find(".so") + 3] if ".so" in name else name


def twice(rt: Runtime) -> list[list[Library]]:
    """The libraries mapped from two files or more (two of one name), each group once."""
    groups: dict[str, list[Library]] = {}
    for lib in rt.libraries:
        if lib.kind in LIBRARIES:
            groups.setdefault(_stem(lib.path), []).append(lib)
    return [libs for libs in groups.values() if len(libs) > 1]


def _twice(groups: list[list[Library]]) -> list[Finding]:
    kind = Kind.LOADED_TWICE
    return [
        Finding(kind, severity(kind), LIBRARIES[libs[0].kind][0], "one copy",
                ", ".join(lib.path for lib in libs))
        for libs in groups
    ]  # fmt: skip


def _version(lib: Library) -> tuple[str, ...]:
    """What a library says of its version, else what its file name says (``.so.9.1.0``)."""
    if lib.version:
        return tuple(lib.version.split("."))
    suffix = os.path.basename(lib.path).partition(".so.")[2]
    return tuple(suffix.split(".")) if suffix else ()


def _cudnn_mixed(rt: Runtime, reported: set[str]) -> list[Finding]:
    """One ``loaded-twice`` naming cuDNN's parts from another folder or version than the
    main libcudnn's (two installs); parts already named (from outside the prefix, or mapped
    twice) are not counted again, nor is anything when the main libcudnn itself is."""
    main, parts = rt.mapped("cudnn"), rt.mapped("cudnn-part")
    if not parts or any(lib.path in reported for lib in main):
        return []
    first = (main or parts)[0]
    where, version = os.path.dirname(first.linked_from or first.path), _version(first)

    def odd(lib: Library) -> bool:
        theirs, n = _version(lib), min(len(version), len(_version(lib)))
        other = os.path.dirname(lib.linked_from or lib.path) != where
        return lib.path not in reported and (other or theirs[:n] != version[:n])

    mixed = [lib for lib in parts if odd(lib)]
    if not mixed:
        return []
    kind = Kind.LOADED_TWICE
    actual = "; ".join(_file(lib) for lib in (first, *mixed))
    return [Finding(kind, severity(kind), "cuDNN", "one cuDNN install", actual, cause=PARTS)]


def outside_prefix(facts: NodeFacts, prefix: str) -> list[Finding]:
    """The interpreter, torch and each library that did not come from ``prefix``."""
    rt, env = facts.runtime, dict(facts.env)
    if rt is None or not prefix:
        return []
    roots = _roots(rt, prefix)
    out = []
    if rt.sys_prefix and not inside(rt.sys_prefix, roots):
        python = f"python {facts.python or '?'} of {rt.sys_prefix}"
        out.append(_outside("python", prefix, python, INTERPRETER))
    beside: tuple[str, ...] = ()  # torch from elsewhere: its finding says where its libraries are
    if rt.torch_file and not inside(rt.torch_file, roots):
        torch = f"torch {facts.torch or '?'} at {os.path.dirname(rt.torch_file)}"
        out.append(_outside("torch", prefix, torch, _python_cause(rt, env)))
        beside = tuple(os.path.dirname(f) for f in (rt.torch_file, rt.torch_real_file) if f)
    reported: set[str] = set()
    for lib in rt.libraries:
        if lib.kind not in LIBRARIES:
            continue
        own = lib.linked_from is not None and inside(lib.linked_from, roots)
        if own or inside(lib.path, roots):  # linked_from: a softlinked prefix's own file
            continue
        reported.add(lib.path)
        if lib.kind not in TORCH_LIBRARIES or not inside(lib.path, beside):
            subject = LIBRARIES[lib.kind][0]
            out.append(_outside(subject, prefix, _file(lib), _library_cause(lib.path, env)))
    groups = twice(rt)
    reported.update(lib.path for libs in groups for lib in libs)
    return out + _twice(groups) + _cudnn_mixed(rt, reported)


def _with_reference(f: Finding, pkg: Package | None) -> Finding:
    return f if pkg is None else replace(f, reference=pkg.identity())


def check(report: HostReport, lock: Environment | None) -> list[Finding]:
    """A host's runtime against its prefix and the lock; one cause, one finding."""
    facts = report.facts
    if facts is None:
        return []
    outside = outside_prefix(facts, report.prefix or (report.env.prefix if report.env else ""))
    if lock is not None:  # name the locked version beside the file from elsewhere
        pinned = {"python": locked(lock, ("python",)), "torch": locked(lock, ("torch",))}
        pinned.update((s, locked(lock, keys)) for s, keys in LIBRARIES.values())
        outside = [_with_reference(f, pinned.get(f.subject)) for f in outside]
    explained = {s for f in outside for s in EXPLAINS.get(f.subject, (f.subject,))}
    differs = [f for f in (against_lock(facts, lock) if lock else []) if f.subject not in explained]
    return [Finding(f.kind, f.severity, f.subject, f.expected, f.actual, (report.host,),
                    f.reference, cause=f.cause) for f in outside + differs]  # fmt: skip


def plugins(facts: NodeFacts) -> str:
    """The NCCL network plugins a node would load, as one comparable value."""
    rt = facts.runtime
    found = sorted({os.path.basename(p.path) for p in (rt.net_plugins if rt else ())})
    named = dict(facts.env).get("NCCL_NET_PLUGIN")
    return ", ".join(found + ([f"NCCL_NET_PLUGIN={named}"] if named else [])) or "none"
