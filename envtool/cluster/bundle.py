"""The node package as it travels: a tar stream for a node's stdin, a copy in a shared folder,
or a private temporary copy to run here (``envtool probe``, ``doctor``).

Every run of the node package, local or remote, is ``python -B -m envtool_node[.module]``
from a folder that holds only the package, so the environment's interpreter imports its own
torch and nothing from envtool's environment.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import shutil
import tarfile
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path

from envtool import private, proc
from envtool.cluster.options import MAX_OUTPUT, MAX_STDERR
from envtool.errors import EnvtoolError, InputError
from envtool.yamlio import write_atomic

PACKAGE = "envtool_node"


def package_dir() -> Path:
    """The node package's folder (installed beside envtool)."""
    import envtool_node

    path = Path(envtool_node.__file__).resolve().parent
    if not (path / "__main__.py").is_file():
        raise EnvtoolError(f"{path}: the node package is incomplete (no __main__.py)")
    return path


def _files() -> list[Path]:
    return sorted(package_dir().glob("*.py"))


@cache
def bundle() -> bytes:
    """The package as a gzipped tar, byte-for-byte reproducible (sent on a node's stdin)."""
    buf = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        for path in _files():
            data = path.read_bytes()
            info = tarfile.TarInfo(f"{PACKAGE}/{path.name}")
            info.size, info.mode, info.mtime = len(data), 0o600, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def payload(token: str, shared: bool = False) -> bytes:
    """What a node's stdin gets (nodescript.node_script): the run's token on a line, then the
    bundle (``shared``: none, the package waits in --bundle-dir)."""
    return token.encode("ascii") + b"\n" + (b"" if shared else bundle())


def digest() -> str:
    """sha256 over the package's files in name order, as a node checks it: ``cat
    envtool_node/*.py | sha256sum`` with LC_ALL=C."""
    h = hashlib.sha256()
    for path in _files():
        h.update(path.read_bytes())
    return h.hexdigest()


def write_bundle(target: Path) -> None:
    """Copy the package into ``target/envtool_node`` (a folder the nodes read, --bundle-dir):
    only into folders of this user's that nobody else can write (private.own_folder)."""
    private.own_folder(target, {PACKAGE}, "--bundle-dir")
    private.own_folder(target / PACKAGE, {p.name for p in _files()}, "--bundle-dir")
    copy_package(target)


def copy_package(target: Path) -> None:
    """``target/envtool_node`` written from the package (no symlink followed)."""
    into = target / PACKAGE
    into.mkdir(parents=True, exist_ok=True)
    for path in _files():
        write_atomic(into / path.name, path.read_text(encoding="utf-8"))


@contextlib.contextmanager
def staged() -> Iterator[Path]:
    """A private temporary folder (0700) holding only the package and ``tmp``, the run's
    TMPDIR, removed afterwards with whatever the run left in it."""
    with private.tempdir("envtool-node-") as root:
        shutil.copytree(package_dir(), root / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
        (root / "tmp").mkdir(mode=0o700)
        yield root


def python_for(prefix: Path | None) -> str:
    """The interpreter of the environment (prefixes.locate: ``--prefix``, ``$CONDA_PREFIX``,
    the lock's env by name); never envtool's own in its place."""
    from envtool.lock.prefixes import locate

    root = locate(prefix)
    for candidate in (root / "bin" / "python", root / "python.exe"):
        if candidate.exists():
            return str(candidate)
    raise InputError(f"{root}: no python in this prefix (bin/python)")


def run_module(
    module: str, args: Sequence[str], prefix: Path | None, timeout: float, check: bool = True
) -> proc.Result:
    """``python -B -m envtool_node.<module> ARGS`` (``module`` "": the package's own main, the
    node document) with the prefix's python, here."""
    python = python_for(prefix)
    with staged() as root:
        argv = [python, "-B", "-m", f"{PACKAGE}.{module}" if module else PACKAGE, *args]
        limits = (MAX_OUTPUT, MAX_STDERR)
        env = {"TMPDIR": str(root / "tmp")}  # torch's, the ranks' and the facts' temp files
        return proc.run(argv, timeout=timeout, cwd=str(root), env=env, check=check, limits=limits)
