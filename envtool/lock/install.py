"""``envtool install``: a lock into a prefix with py-rattler (hashes checked), then pip entries."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import stat
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from envtool import private
from envtool.errors import InputError, InstallError, ProblemFound
from envtool.lock import (
    filelock,
    lockfile,
    pin,
    pip_install,
    pkgcache,
    secrets,
    sources,
    stamp,
    wheelcache,
)
from envtool.lock.lockfile import LockedPackage, Lockfile
from envtool.lock.prefixes import INCOMPLETE_MARKER, source_env
from envtool.lock.solve import default_cache_dir
from envtool.yamlio import write_atomic

_BUILD_NUMBER = re.compile(r"_(\d+)$")


@dataclass(frozen=True)
class InstallOptions:
    """What ``envtool install`` was asked to do."""

    lock_path: Path
    prefix: Path
    platform: str = "linux-64"
    allow_stale: bool = False
    cache_dir: Path | None = None
    mirrors: tuple[tuple[str, str], ...] = ()  # NAME=URL: file:// packages inside URL allowed
    allow_insecure_url: bool = False  # http://, and file:// outside every mirror
    progress: bool = False  # download/link bars on stderr (a terminal, not -q, not CI)
    shared_cache: Path | None = None  # --cache DIR: a filled cache read behind the own one


@dataclass(frozen=True)
class InstallResult:
    """What an install did."""

    prefix: Path
    conda: int
    pip: int
    seconds: float
    sources: pkgcache.Sources = field(default_factory=pkgcache.Sources)  # where conda's came from


def ensure_fresh(lock_path: Path, data: Lockfile, platform: str) -> None:
    """Refuse a lock whose environment file changed since it was solved."""
    env_path = source_env(lock_path, data)
    if env_path is None:
        return
    result = pin.check(env_path, lock_path)
    if platform in result.stale:
        raise ProblemFound(
            f"{lock_path}: stale for {platform}: {env_path} changed since it was locked; "
            f"run 'envtool lock -f {env_path} --lockfile {lock_path}' (or pass --allow-stale)"
        )


def _record(pkg: LockedPackage) -> Any:
    from rattler import BuildString, PackageRecord, RepoDataRecord

    build = pkg.build
    match = _BUILD_NUMBER.search(build)
    noarch: Literal["python", "generic"] | None = None
    if pkg.subdir == "noarch":
        noarch = "python" if any(n == "python" for n, _ in pkg.dependencies) else "generic"
    record = PackageRecord(
        name=pkg.name,
        version=pkg.version,
        build=BuildString(build),
        build_number=int(match.group(1)) if match else 0,
        subdir=pkg.subdir,
        noarch=noarch,
        depends=[f"{n} {s}".strip() for n, s in pkg.dependencies],
        md5=bytes.fromhex(pkg.md5) if pkg.md5 else None,
        sha256=bytes.fromhex(pkg.sha256) if pkg.sha256 else None,
    )
    return RepoDataRecord(record, pkg.filename, pkg.url, pkg.channel_url + "/")


def _installed(prefix: Path) -> list[Any]:
    from rattler import PrefixRecord

    meta = prefix / "conda-meta"
    return [PrefixRecord.from_path(p) for p in sorted(meta.glob("*.json"))] if meta.is_dir() else []


def _file_digests(url: str, path: Path) -> dict[str, str]:
    """md5 and sha256 of a regular file, read in chunks (a device or a pipe is refused: it
    could be read forever)."""
    hashes = {"md5": hashlib.md5(), "sha256": hashlib.sha256()}
    try:
        with path.open("rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise InstallError(f"{url}: not a regular file, not an archive")
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                for digest in hashes.values():
                    digest.update(chunk)
    except OSError as exc:
        raise InstallError(f"{url}: cannot read the archive: {exc.strerror}") from None
    return {kind: digest.hexdigest() for kind, digest in hashes.items()}


def _local_there(url: str) -> bool:
    return urlparse(url).scheme == "file" and Path(sources.resolved_path(url)).exists()


def verify_local_archives(packages: list[LockedPackage]) -> None:
    """Check md5/sha256 of ``file://`` archives (rattler checks downloads, not local files)."""
    for pkg in packages:
        parsed = urlparse(pkg.url)
        if parsed.scheme != "file":
            continue
        digests = _file_digests(pkg.url, Path(sources.resolved_path(pkg.url)))
        for kind, want in (("md5", pkg.md5), ("sha256", pkg.sha256)):
            got = digests[kind]
            if want and got != want:
                raise InstallError(
                    f"{pkg.filename}: {kind} mismatch: the lock says {want}, the archive has {got}"
                )


def _install_conda(
    packages: list[LockedPackage], options: InstallOptions, cache: Path
) -> tuple[int, pkgcache.Sources]:
    from rattler import install
    from rattler.exceptions import InstallerError
    from rattler.platform import Subdir

    records = [_record(p) for p in packages]
    private.private_folder(cache / "pkgs")  # a private channel's packages
    where = pkgcache.places(records, cache / "pkgs", options.shared_cache)
    # a file:// archive is checked where it is there; one that is not is passed over only
    # where a cache holds the package (a node off the channel; the cache's copy is checked)
    verify_local_archives([p for p, w in zip(packages, where, strict=True)
                           if w == pkgcache.FETCHED or _local_there(p.url)])  # fmt: skip
    try:
        asyncio.run(
            install(
                records,
                target_prefix=str(options.prefix),
                installed_packages=_installed(options.prefix),
                platform=Subdir(options.platform),
                show_progress=options.progress,  # rattler's bars on stderr
                package_cache=pkgcache.layered(cache / "pkgs", options.shared_cache),
            )
        )
    except InstallerError as exc:
        raise InstallError(f"{options.prefix}: install failed: {_said(exc)}") from None
    came = pkgcache.counted(where, records, cache / "pkgs", options.shared_cache)
    return _count_installed(packages, options.prefix), came


def _said(exc: Exception) -> str:
    """rattler's error chain in one line: what failed, then its root cause (ENOSPC, ...);
    a URL's credentials never shown."""
    detail = secrets.mask(" ".join(str(exc).split()))
    chain = [p.strip() for p in detail.split("Caused by:") if p.strip()]
    return f"{chain[0]}: ... {chain[-1]}" if len(chain) > 2 else detail


def _count_installed(packages: list[LockedPackage], prefix: Path) -> int:
    """How many of the lock's conda packages the prefix's records show as installed, each
    from the URL the install checked (InstallError for the first one missing)."""
    have = {
        (str(r.name.normalized), str(r.version), str(r.build)): str(r.url)
        for r in _installed(prefix)
    }
    for pkg in packages:
        url = have.get((pkg.name, pkg.version, pkg.build))
        if url != pkg.url:
            found = f"from {url}" if url else "no record"
            raise InstallError(f"{prefix}: {pkg.filename} is not installed as locked ({found})")
    return len(packages)


def _prefix_python(prefix: Path, platform: str) -> Path:
    python = prefix / ("python.exe" if platform.startswith("win") else "bin/python")
    if not python.exists():
        raise InstallError(f"{prefix}: pip entries need python in the prefix, found none")
    return python


def _remove_prefix(prefix: Path) -> None:
    """Remove a half-made prefix; rattler's worker tasks may still write for a moment after
    the install call has failed, so remove until it stays gone."""
    quiet_since = None
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        if prefix.exists():
            shutil.rmtree(prefix, ignore_errors=True)
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 0.3:
            return
        time.sleep(0.05)


def _mark_incomplete(options: InstallOptions) -> Path:
    """Write the marker (temp file + rename) before the prefix is touched; its path."""
    marker = options.prefix / INCOMPLETE_MARKER
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = (
        "envtool install did not finish; re-run envtool install\n"
        f"lock: {options.lock_path.resolve()}\n"
        f"platform: {options.platform}\n"
        f"started: {started}\n"
    )
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(marker, text)
    except OSError as exc:
        raise InstallError(f"{options.prefix}: cannot write {marker}: {exc.strerror}") from None
    return marker


def install(options: InstallOptions) -> InstallResult:
    """Install the lock's entries for one platform into ``prefix``."""
    start = time.perf_counter()
    data = lockfile.read(options.lock_path)
    packages = data.for_platform(options.platform)
    if not packages:
        have = ", ".join(data.metadata.platforms) or "none"
        raise InputError(f"{options.lock_path}: no packages for {options.platform} (has: {have})")
    vcs = [p for p in packages if p.manager == "pip" and p.revision]
    if vcs:  # before anything is installed: pip's --require-hashes installs files only
        p = vcs[0]
        pinned = p.url if p.url.endswith(p.revision) else f"{p.url}@{p.revision}"
        raise InputError(
            f"{options.lock_path}: pip entry {p.name} is a commit of a repository, not a "
            f"hash-checked file: envtool install cannot install it (pip install --no-deps "
            f"'{p.name} @ {pinned}' does, unchecked)"
        )
    used, bases = _resolved(options, packages)
    conda = [p for p in used if p.manager == "conda"]
    pip = [p for p in used if p.manager == "pip"]
    for p in pip:  # each checked as the lock has it, then as the install takes it
        pip_install.requirement(options.lock_path, p)
    pip, pip_came = wheelcache.taken(pip, options.shared_cache)
    lines = [pip_install.requirement(options.lock_path, p) for p in pip]
    if not options.allow_stale:
        ensure_fresh(options.lock_path, data, options.platform)
    busy = f"{options.prefix}: another envtool install into it is running"
    with filelock.held(options.prefix, "install", wait=False, busy=busy):
        created = not options.prefix.exists()  # decided under the lock: the prefix is ours
        try:
            marker = _mark_incomplete(options)  # a new prefix too: a SIGKILL runs no cleanup
            try:
                cache = options.cache_dir or default_cache_dir()
                n_conda, came = _install_conda(conda, options, cache)
            finally:
                secrets.scrub_records(options.prefix, bases)
            n_pip = 0
            if pip:
                python = _prefix_python(options.prefix, options.platform)
                n_pip = pip_install.install(pip, lines, python, options.prefix)
        except BaseException:
            if created:  # a prefix we made and could not finish is removed, not left half-built
                _remove_prefix(options.prefix)
            raise  # an existing prefix keeps the marker: it is no longer what it was
        stamp.write(options.prefix, options.lock_path, options.platform)  # which lock made it
        marker.unlink(missing_ok=True)
    came = replace(came, pip=pip_came)
    return InstallResult(options.prefix, n_conda, n_pip, time.perf_counter() - start, came)


def _resolved(
    options: InstallOptions, packages: tuple[LockedPackage, ...]
) -> tuple[tuple[LockedPackage, ...], dict[str, str]]:
    """The packages with the URLs the install uses, a channel's credentials filled in (in
    memory only; each record gets its template back: ``bases``), each URL checked as used."""
    bases = secrets.bases(tuple({p.channel_url for p in packages if secrets.used_vars(p.url)}))
    packages = tuple(
        replace(p, url=secrets.expand(p.url)) if p.channel_url in bases.values() else p
        for p in packages
    )
    try:
        used = sources.checked(
            packages, dict(options.mirrors), options.allow_insecure_url, options.lock_path
        )
    except InputError as exc:  # it quotes the URL, whose credentials are filled in by now
        raise InputError(secrets.mask(str(exc))) from None
    return used, bases


def fill_cache(options: InstallOptions, shared: Path) -> tuple[int, int]:
    """``--cache DIR`` filled from the lock's URLs (the conda packages and the pip files,
    hash-checked): what the nodes then read. How many conda packages and pip files of the
    lock it holds."""
    data = lockfile.read(options.lock_path)
    packages = data.for_platform(options.platform)
    used = _resolved(options, packages)[0]
    conda = [p for p in used if p.manager == "conda"]
    verify_local_archives(conda)
    from rattler.exceptions import InstallerError

    try:
        held = pkgcache.fill([_record(p) for p in conda], shared, options.platform)
    except InstallerError as exc:
        raise InstallError(f"--cache {shared}: could not fill it: {_said(exc)}") from None
    return held, wheelcache.fill([p for p in used if p.manager == "pip"], shared)
