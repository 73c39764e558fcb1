"""One prefix brought back to its lock, on the machine that holds it: the plan
(fix/plan.py), then, only with ``apply``, the whole lock installed into a new generation at
its final path, checked (its records are the lock's, its python imports torch from it), then
``P`` switched to it in one step (fix/generations.py), the older generations beyond ``keep``
removed unless a running process holds them. Anything that fails before the switch removes
the new generation and leaves ``P`` as it was; a generation an earlier run left half-made
(the install marker in it) is removed first."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from envtool.errors import InputError, InstallError
from envtool.fix import generations as gens
from envtool.fix.plan import Plan, plan
from envtool.lock import filelock, lockfile
from envtool.lock.install import InstallOptions, install


@dataclass(frozen=True)
class FixOptions:
    """What to fix and how (``--keep`` generations kept beside the one in use)."""

    lock_path: Path
    prefix: Path
    platform: str = "linux-64"
    apply: bool = False
    keep: int = 1
    allow_gap: bool = False
    cache_dir: Path | None = None
    shared_cache: Path | None = None  # --cache DIR: the cache the controller filled (read)
    mirrors: tuple[tuple[str, str], ...] = ()
    allow_insecure_url: bool = False
    proc: Path = Path("/proc")


@dataclass(frozen=True)
class FixOutcome:
    """What happened to one prefix."""

    prefix: Path
    plan: Plan
    applied: bool = False  # P was switched to a new generation
    generation: str = ""  # the generation P is now (its name), "" when P is unchanged
    switch: str = ""  # exchange, rename, rename with a gap
    removed: tuple[str, ...] = ()  # generations removed (older ones, half-made ones)
    kept_in_use: tuple[tuple[str, tuple[int, ...]], ...] = ()  # generation, pids holding it
    unread: int = 0  # processes whose maps could not be read (another user's)
    notes: tuple[str, ...] = field(default=())
    source: str = ""  # where the new generation's packages came from (pkgcache.Sources)


def check_writable(prefix: Path) -> None:
    """``P`` and every folder above it are this user's or root's, and none can be written
    by another user (but a sticky folder): else a fix could be redirected (InputError)."""
    gens.check_writable(prefix)


def _is_prefix(prefix: Path) -> None:
    if not (prefix / "conda-meta").is_dir():
        raise InputError(f"{prefix}: not a conda environment (no conda-meta/)")


PENDING = gens.PENDING  # in a generation from its start to its switch
PREVIOUS = gens.PREVIOUS  # the generation P was before it (a rollback's target)


def _check(lock: lockfile.Lockfile, options: FixOptions, target: Path) -> None:
    """The new generation is the lock (records), and its python imports torch from it."""
    from envtool import environments, proc

    left = plan(environments.from_lock(lock, str(options.lock_path), options.platform),
                environments.from_prefix(target))  # fmt: skip
    if not left.empty:
        names = ", ".join(c.name for c in left.changes[:5])
        raise InstallError(f"{target}: the new generation is not the lock ({names})")
    if not any(p.name == "pytorch" for p in lock.for_platform(options.platform)):
        return
    code = "import os, torch; print(os.path.abspath(torch.__file__))"  # found under it
    ran = proc.run([str(target / "bin" / "python"), "-c", code], timeout=300, check=False,
                   limits=(64 * 1024, 64 * 1024))  # fmt: skip
    loaded = ran.stdout.strip()
    inside = (str(target) + "/", str(target.resolve()) + "/")
    if ran.returncode != 0 or not loaded.startswith(inside):
        said = loaded or ran.stderr.strip().splitlines()[-1:] or ["no output"]
        raise InstallError(f"{target}: its python does not import torch from it ({said})")


def run(options: FixOptions) -> FixOutcome:
    """Plan, and with ``apply`` carry the plan out (InstallError, InputError as they come;
    ``P`` is as it was whenever one is raised before the switch)."""
    from envtool import environments

    prefix = options.prefix.absolute()
    _is_prefix(prefix)
    check_writable(prefix)
    lock = lockfile.read(options.lock_path)
    if not lock.for_platform(options.platform):
        have = ", ".join(lock.metadata.platforms) or "none"
        raise InputError(f"{options.lock_path}: no packages for {options.platform} (has: {have})")
    gens.current(prefix)  # P a link to anything but its generations: refused before a plan
    wanted = environments.from_lock(lock, str(options.lock_path), options.platform)
    todo = plan(wanted, environments.from_prefix(prefix))
    outcome = FixOutcome(prefix, todo)
    if not options.apply or todo.empty:
        return outcome
    busy = f"{prefix}: another envtool fix of it is running"
    with filelock.held(prefix, "fix", wait=False, busy=busy):  # one fix of a prefix at a time
        return _apply(options, lock, outcome, gens.current(prefix))


def _apply(
    options: FixOptions, lock: lockfile.Lockfile, outcome: FixOutcome, now: gens.Generation | None
) -> FixOutcome:
    prefix = outcome.prefix
    left = gens.stale(prefix, now)
    for stale in left:
        gens.remove(stale)
    removed = [p.name for p in left]
    if now is not None:
        (now.path / PENDING).unlink(missing_ok=True)  # switched to, by a run cut short after
    target = gens.next_path(prefix)
    try:
        (target / "conda-meta").mkdir(parents=True)
        (target / PENDING).write_text("envtool fix: not switched to yet\n")
        done = install(InstallOptions(options.lock_path, target, options.platform,
                                      allow_stale=True, cache_dir=options.cache_dir,
                                      mirrors=options.mirrors,
                                      allow_insecure_url=options.allow_insecure_url,
                                      shared_cache=options.shared_cache))  # fmt: skip
        _check(lock, options, target)
        was = now.path.name if now is not None else gens.path_of(prefix, 0).name
        (target / PREVIOUS).write_text(was + "\n")
        how = gens.switch(prefix, target, options.allow_gap)
        (target / PENDING).unlink()
    except BaseException as exc:
        if target.exists() and gens.current(prefix) != gens.Generation(0, target):
            try:
                gens.remove(target)
            except InstallError as left:  # the first error is what the user needs first
                raise InstallError(f"{exc}; and {left}: remove it by hand") from None
        raise
    outcome = replace(outcome, applied=True, generation=target.name, switch=how,
                      source=done.sources.said())  # fmt: skip
    return _prune(options, outcome, removed)


def _prune(options: FixOptions, outcome: FixOutcome, removed: list[str]) -> FixOutcome:
    """Older generations beyond ``keep`` removed, but one a process holds. A process this
    user cannot read (another user's, or the system's) is not checked: counted in
    ``unread`` and said in the report; ``keep`` keeps older generations whatever holds them."""
    gone, kept, unread = gens.prune(outcome.prefix, options.keep, options.proc)
    return replace(outcome, removed=tuple(removed + gone), kept_in_use=tuple(kept), unread=unread)


def rollback(options: FixOptions) -> FixOutcome:
    """``P`` switched back to the generation before the one in use (generation 0, the
    directory it was, exchanged back into place)."""
    prefix = options.prefix.absolute()
    check_writable(prefix)
    back = gens.roll_back(prefix)
    if back is None:  # never switched: left alone, said so
        return FixOutcome(prefix, Plan(), notes=("never switched by envtool fix",))
    return FixOutcome(prefix, Plan(), applied=True, generation=back[0], switch=back[1])
