"""``envtool lock``: environment.yml → conda-lock v1, and the freshness check."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from envtool.errors import InputError
from envtool.lock import filelock, lockfile, spec
from envtool.lock.lockfile import Lockfile, LockMeta
from envtool.lock.solve import Solver, SolveRequest, default_cache_dir


@dataclass(frozen=True)
class LockOptions:
    """What ``envtool lock`` was asked to do."""

    env_path: Path
    lock_path: Path
    platforms: tuple[str, ...] = ()
    mirrors: Mapping[str, str] = field(default_factory=dict)
    virtual_spec: Path | None = None
    cache_dir: Path | None = None


@dataclass(frozen=True)
class LockResult:
    """What a lock run produced."""

    lock_path: Path
    counts: tuple[tuple[str, int, int], ...]  # platform, conda entries, pip entries
    seconds: float


@dataclass(frozen=True)
class CheckResult:
    """Freshness of a lockfile against its environment file."""

    lock_path: Path
    env_path: Path
    stale: tuple[str, ...]  # platforms whose content hash differs or that are missing

    @property
    def fresh(self) -> bool:
        """True when every platform's recorded hash matches the environment file."""
        return not self.stale


def parse_mirrors(values: tuple[str, ...]) -> dict[str, str]:
    """``("conda-forge=file:///mirror",)`` → ``{"conda-forge": "file:///mirror"}``."""
    mirrors: dict[str, str] = {}
    for value in values:
        name, sep, url = value.partition("=")
        if not sep or not name.strip() or not url.strip():
            raise InputError(f"--channel-mirror {value!r}: expected NAME=URL")
        mirrors[name.strip()] = url.strip()
    return mirrors


def platforms_for(env: spec.EnvSpec, requested: tuple[str, ...]) -> tuple[str, ...]:
    """``-p`` options, else the file's ``platforms:``, else linux-64."""
    chosen = requested or env.platforms or ("linux-64",)
    for platform in chosen:
        if platform not in spec.KNOWN_PLATFORMS:
            raise InputError(
                f"unknown platform '{platform}' (known: {', '.join(spec.KNOWN_PLATFORMS)})"
            )
    return tuple(dict.fromkeys(chosen))


def _virtual(env_path: Path, explicit: Path | None) -> dict[str, tuple[spec.VirtualPackage, ...]]:
    return spec.read_virtual_packages(explicit or spec.find_virtual_spec(env_path))


def _relative_source(env_path: Path, lock_path: Path) -> str:
    try:
        return str(env_path.resolve().relative_to(lock_path.resolve().parent))
    except ValueError:
        return str(env_path.resolve())


def merge(old: Lockfile | None, new: Lockfile) -> Lockfile:
    """Keep ``old``'s entries for platforms ``new`` did not solve (``lock -p`` on one platform)."""
    if old is None:
        return new
    solved = set(new.metadata.platforms)
    kept = tuple(p for p in old.packages if p.platform not in solved)
    hashes = dict(old.metadata.content_hash)
    hashes.update(new.metadata.content_hash)
    platforms = tuple(dict.fromkeys(old.metadata.platforms + new.metadata.platforms))
    meta = replace(new.metadata, content_hash=tuple(hashes.items()), platforms=platforms)
    return Lockfile(meta, kept + new.packages)


def _kept(lock_path: Path, platforms: tuple[str, ...]) -> Lockfile | None:
    """The lock as it is now, when it holds platforms this run does not solve."""
    if lock_path.exists() and set(lockfile.read_platforms(lock_path)) - set(platforms):
        return lockfile.read(lock_path)
    return None


def lock(options: LockOptions, solver: Solver) -> LockResult:
    """Solve and write the lockfile; a failure never touches an existing lock."""
    from envtool.lock import pip_lock

    start = time.perf_counter()
    env = spec.read_env(options.env_path)
    platforms = platforms_for(env, options.platforms)
    virtual = _virtual(options.env_path, options.virtual_spec)
    request = SolveRequest(
        env, platforms, virtual, dict(options.mirrors), options.cache_dir or default_cache_dir()
    )
    conda = solver.solve(request)
    pip = pip_lock.lock_pip(env, platforms, conda, request.cache_dir) if env.pip else []
    meta = LockMeta(
        content_hash=tuple((p, spec.content_hash(env, p, virtual)) for p in platforms),
        channels=env.channels,
        platforms=platforms,
        sources=(_relative_source(options.env_path, options.lock_path),),
    )
    solved = Lockfile(meta, tuple(conda) + tuple(pip))
    # Read, merge and write under the lockfile's lock: another `envtool lock -p OTHER` that
    # finished meanwhile keeps its platforms (the solve itself, the slow part, runs outside).
    with filelock.held(options.lock_path, "write", wait=True):
        lockfile.write(merge(_kept(options.lock_path, platforms), solved), options.lock_path)
    counts = tuple(
        (p, sum(1 for x in conda if x.platform == p), sum(1 for x in pip if x.platform == p))
        for p in platforms
    )
    return LockResult(options.lock_path, counts, time.perf_counter() - start)


def check(env_path: Path, lock_path: Path, virtual_spec: Path | None = None) -> CheckResult:
    """Compare the lock's content hashes with what ``environment.yml`` gives now."""
    env = spec.read_env(env_path)
    lock_data = lockfile.read(lock_path)
    virtual = _virtual(env_path, virtual_spec)
    platforms = lock_data.metadata.platforms or platforms_for(env, ())
    wanted = tuple(dict.fromkeys(platforms + env.platforms))
    stale = tuple(
        p for p in wanted if lock_data.metadata.hash_for(p) != spec.content_hash(env, p, virtual)
    )
    return CheckResult(lock_path, env_path, stale)
