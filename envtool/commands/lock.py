"""``envtool lock``: environment.yml → conda-lock.yml (or ``--check`` its freshness)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envtool.errors import EXIT_OK, EXIT_PROBLEMS, InputError
from envtool.lock import pin
from envtool.lock.solve import Solver
from envtool.report import results


@dataclass(frozen=True)
class LockArgs:
    """What ``envtool lock`` was asked to do."""

    env_file: Path
    lockfile: Path
    platforms: tuple[str, ...] = ()
    channel_mirror: tuple[str, ...] = ()
    solver: str = "rattler"  # rattler | conda-lock
    conda_exe: Path | None = None
    virtual_package_spec: Path | None = None
    check: bool = False
    cache_dir: Path | None = None


def solver(name: str, conda_exe: Path | None) -> Solver:
    """The solver backend: py-rattler in-process, or the conda-lock CLI with ``--conda``."""
    from envtool.lock.solve import RattlerSolver

    if name == "rattler":
        if conda_exe is not None:
            raise InputError("--conda is only used with --solver conda-lock")
        return RattlerSolver()
    if conda_exe is None:
        raise InputError(
            "--solver conda-lock needs --conda PATH (a conda, mamba or micromamba "
            "executable); without one conda-lock tries to download one"
        )
    from envtool.lock.condalock import CondaLockSolver

    return CondaLockSolver(conda_exe)


def run(args: LockArgs) -> int:
    """Lock, or check the lock; 1 when ``--check`` finds it stale."""
    if args.check:
        result = pin.check(args.env_file, args.lockfile, args.virtual_package_spec)
        results.check_result(result)
        return EXIT_OK if result.fresh else EXIT_PROBLEMS
    options = pin.LockOptions(
        args.env_file,
        args.lockfile,
        args.platforms,
        pin.parse_mirrors(args.channel_mirror),
        args.virtual_package_spec,
        args.cache_dir,
    )
    results.lock_result(pin.lock(options, solver(args.solver, args.conda_exe)))
    return EXIT_OK
