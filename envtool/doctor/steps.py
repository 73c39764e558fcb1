"""The steps of ``envtool doctor``: each one check of this machine, a ✓/✗ line and its fix."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envtool import environments
from envtool.errors import EnvtoolError, InputError
from envtool.judge.findings import Severity
from envtool.lock import prefixes
from envtool.lock.install import InstallOptions
from envtool.lock.lockfile import Lockfile
from envtool.lock.lockfile import read as read_lock
from envtool.report.doctor import FAIL as FAIL
from envtool.report.doctor import PASS as PASS
from envtool.report.doctor import SKIP as SKIP
from envtool.report.doctor import WARN as WARN
from envtool.report.labels import words

TROUBLE = "docs/troubleshooting.md"


@dataclass(frozen=True)
class Step:
    """One line of the doctor's report."""

    name: str  # lockfile | environment | packages | consistency | torch | cuda | ddp | gpus
    # | network | ports
    status: str  # pass | fail | warn | skip
    summary: str
    fix: str = ""


def quote(path: Path | str) -> str:
    return shlex.quote(str(path))


def _relock(lock_path: Path, env_path: Path) -> str:
    return f"envtool lock -f {quote(env_path)} --lockfile {quote(lock_path)}"


def lockfile(lock_path: Path, platform: str) -> tuple[Step, Lockfile | None]:
    """The lock exists, parses, has the platform, and is fresh against its environment.yml."""
    from envtool.lock import pin

    env_guess = lock_path.parent / "environment.yml"
    if not lock_path.is_file():
        fix = (
            _relock(lock_path, env_guess)
            if env_guess.is_file()
            else "get the lab's environment.yml and conda-lock.yml: git clone the lab's repo"
        )
        return Step("lockfile", FAIL, f"{lock_path} not found", fix), None
    try:
        data = read_lock(lock_path)
    except InputError as exc:
        return Step("lockfile", FAIL, str(exc), _relock(lock_path, env_guess)), None
    count = len(data.for_platform(platform))
    if not count:
        have = ", ".join(data.metadata.platforms) or "none"
        fix = f"{_relock(lock_path, env_guess)} -p {platform}"
        return Step("lockfile", FAIL, f"{lock_path} has no {platform} packages ({have})", fix), None
    env_path = prefixes.source_env(lock_path, data)
    if env_path is None:
        summary = f"{lock_path}: {count} packages for {platform}; no environment.yml to check"
        return Step("lockfile", WARN, summary, "keep environment.yml beside the lock"), data
    try:
        result = pin.check(env_path, lock_path)
    except InputError as exc:
        return Step("lockfile", FAIL, str(exc), f"fix {env_path}, then re-lock"), data
    if platform in result.stale:
        summary = f"{lock_path} is stale: {env_path} changed since it was locked"
        return Step("lockfile", FAIL, summary, _relock(lock_path, env_path)), data
    summary = f"{lock_path}: {count} packages for {platform}, fresh against {env_path}"
    return Step("lockfile", PASS, summary), data


def install_fix(lock_path: Path, prefix: Path) -> str:
    """``envtool install`` for this prefix, and the conda-lock equivalent."""
    return (
        f"envtool install --lockfile {quote(lock_path)} --prefix {quote(prefix)}"
        f"   (or: conda-lock install --prefix {quote(prefix)} {quote(lock_path)})"
    )


def environment(
    lock_path: Path,
    lock: Lockfile | None,
    prefix: Path | None,
    install: Callable[[Path], Step],
    offer_install: Callable[[Path], bool],
) -> tuple[Step, Path | None]:
    """The environment is installed where it is expected (offering to ``install`` it)."""
    name = prefixes.env_name(lock_path, lock) or "ddp"
    looked = [prefix] if prefix is not None else prefixes.candidates(name)
    found = next((p for p in looked if (p / "conda-meta").is_dir()), None)
    if found is not None and prefixes.incomplete(found):
        summary = f"{found}: an envtool install into it did not finish"
        return Step("environment", FAIL, summary, install_fix(lock_path, found)), found
    if found is not None:
        return Step("environment", PASS, f"{name} at {found}"), found
    target = prefix or Path(os.path.expanduser(f"~/.conda/envs/{name}"))
    where = ", ".join(str(p) for p in looked[:3]) + (", ..." if len(looked) > 3 else "")
    summary = f"no {name} environment (looked in {where})"
    if lock is None or not offer_install(target):
        return Step("environment", FAIL, summary, install_fix(lock_path, target)), None
    step = install(target)
    return step, (target if step.status == PASS else None)


def install_step(options: InstallOptions) -> Step:
    """``envtool install`` of the lock into a missing environment, as a step."""
    from envtool.lock.install import install

    lock_path, target = options.lock_path, options.prefix
    try:
        done = install(options)
    except EnvtoolError as exc:
        return Step("environment", FAIL, f"install failed: {exc}", install_fix(lock_path, target))
    summary = f"installed {done.conda + done.pip} packages into {target} ({done.seconds:.1f} s)"
    return Step("environment", PASS, summary)


def packages(lock_path: Path, lock: Lockfile, prefix: Path, platform: str) -> Step:
    """The installed packages against the lock (the drift engine), pip shadowing included."""
    from envtool.judge import packages as compare

    try:
        env = environments.from_prefix(prefix)
    except EnvtoolError as exc:
        return Step(
            "packages", FAIL, f"cannot read {prefix}: {exc}", install_fix(lock_path, prefix)
        )
    reference = environments.from_lock(lock, str(lock_path), platform)
    findings = compare.diff(reference, env)
    said = _stamp(env.stamp, lock_path)
    errors = [f for f in findings if f.severity is Severity.ERROR]
    shown = "; ".join(
        f"{f.kind.value} {f.subject} ({words(f).actual})" for f in (errors or findings)[:3]
    )
    more = f" and {len(errors or findings) - 3} more" if len(errors or findings) > 3 else ""
    if errors:
        shadow = [words(f).fix for f in errors if f.kind.value == "pip-shadowing"]
        fix = "; ".join(shadow) if len(shadow) == len(errors) else install_fix(lock_path, prefix)
        summary = f"{len(errors)} differences from the lock{said}: {shown}{more}"
        return Step("packages", FAIL, summary, fix)
    if findings:
        summary = f"matches the lock{said}, plus {len(findings)} not in it: {shown}{more}"
        fix = "remove them, or add them to environment.yml and re-lock"
        return Step("packages", WARN, summary, fix)
    return Step("packages", PASS, f"all {len(env.packages)} packages match the lock{said}")


def _stamp(stamp: str, lock_path: Path) -> str:
    """What the prefix's install stamp says (lock/stamp.py): ``(installed from this lock)``,
    ``(installed from another lock ccd40ac427ff)``, or nothing without a stamp."""
    from envtool.lock.stamp import lock_hash

    if not stamp:
        return ""
    try:
        this = lock_hash(lock_path)
    except OSError:
        return ""
    return (
        " (installed from this lock)"
        if stamp == this
        else (f" (installed from another lock {stamp[:12]})")
    )


def consistency(prefix: Path) -> Step:
    """The installed environment on its own: two torches, CUDA majors mixed, two NCCLs, ...
    (judge/consistency.py, what ``envtool check PREFIX`` says)."""
    from envtool.judge import consistency as rules

    try:
        env = environments.from_prefix(prefix)
    except EnvtoolError as exc:
        return Step("consistency", FAIL, f"cannot read {prefix}: {exc}")
    found = rules.check(env)
    if not found:
        return Step("consistency", PASS, f"one torch, one CUDA major, one NCCL in {prefix}")
    said = [words(f) for f in found]
    summary = "; ".join(f"{f.kind.value}: {w.actual}" for f, w in zip(found, said, strict=True))
    return Step("consistency", FAIL, summary, said[0].fix)
