"""The click command line: parse options, call one core function, hand the result to report.

This is the one place that turns exceptions into exit codes.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from envtool import __version__
from envtool.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_TERMINATED,
    EnvtoolError,
    InputError,
    Terminated,
)

if TYPE_CHECKING:
    from envtool.solve import Solver

PathArg = click.Path(path_type=Path)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="envtool")
def cli() -> None:
    """Pin, build, probe and verify PyTorch DDP environments across GPU nodes."""


@cli.command()
@click.option(
    "-f",
    "--file",
    "env_file",
    type=PathArg,
    default=Path("environment.yml"),
    show_default=True,
    help="The environment file to lock.",
)
@click.option("--lockfile", type=PathArg, default=Path("conda-lock.yml"), show_default=True)
@click.option(
    "-p",
    "--platform",
    "platforms",
    multiple=True,
    help="Platform to solve for (repeatable); default: the file's, else linux-64.",
)
@click.option(
    "--channel-mirror",
    multiple=True,
    metavar="NAME=URL",
    help="Solve NAME from URL; the lock still records NAME's canonical URLs.",
)
@click.option(
    "--solver", type=click.Choice(["rattler", "conda-lock"]), default="rattler", show_default=True
)
@click.option(
    "--conda",
    "conda_exe",
    type=PathArg,
    help="conda/mamba/micromamba executable for --solver conda-lock.",
)
@click.option(
    "--virtual-package-spec",
    type=PathArg,
    help="conda-lock virtual-package file (default: virtual-packages.yml beside -f).",
)
@click.option(
    "--check", is_flag=True, help="Exit 1 if the lock is stale, 0 if fresh; write nothing."
)
@click.option("--cache-dir", type=PathArg, help="Repodata and package cache.")
def lock(
    env_file: Path,
    lockfile: Path,
    platforms: tuple[str, ...],
    channel_mirror: tuple[str, ...],
    solver: str,
    conda_exe: Path | None,
    virtual_package_spec: Path | None,
    check: bool,
    cache_dir: Path | None,
) -> int:
    """Solve environment.yml into a conda-lock v1 lockfile."""
    from envtool import lock as lock_mod
    from envtool import report

    if check:
        result = lock_mod.check(env_file, lockfile, virtual_package_spec)
        report.check_result(result)
        return EXIT_OK if result.fresh else EXIT_PROBLEMS
    options = lock_mod.LockOptions(
        env_file,
        lockfile,
        platforms,
        lock_mod.parse_mirrors(channel_mirror),
        virtual_package_spec,
        cache_dir,
    )
    report.lock_result(lock_mod.lock(options, _solver(solver, conda_exe, lockfile)))
    return EXIT_OK


def _solver(name: str, conda_exe: Path | None, lockfile: Path) -> Solver:
    from envtool.solve import RattlerSolver

    if name == "rattler":
        if conda_exe is not None:
            raise InputError("--conda is only used with --solver conda-lock")
        return RattlerSolver()
    if conda_exe is None:
        raise InputError(
            "--solver conda-lock needs --conda PATH (a conda, mamba or micromamba "
            "executable); without one conda-lock tries to download one"
        )
    from envtool.condalock import CondaLockSolver

    return CondaLockSolver(conda_exe)


@cli.command()
@click.option("--lockfile", type=PathArg, default=Path("conda-lock.yml"), show_default=True)
@click.option(
    "--prefix", type=PathArg, required=True, help="Environment directory to install into."
)
@click.option("--platform", default="linux-64", show_default=True)
@click.option("--allow-stale", is_flag=True, help="Install even if environment.yml changed.")
@click.option("--cache-dir", type=PathArg, help="Package cache.")
def install(
    lockfile: Path, prefix: Path, platform: str, allow_stale: bool, cache_dir: Path | None
) -> int:
    """Install a lockfile's packages (hashes checked) into a prefix."""
    from envtool import install as install_mod
    from envtool import report

    options = install_mod.InstallOptions(lockfile, prefix, platform, allow_stale, cache_dir)
    report.install_result(install_mod.install(options))
    return EXIT_OK


def _register() -> None:
    from envtool.cli_build import build
    from envtool.cli_doctor import doctor
    from envtool.cli_node import COMMANDS
    from envtool.cli_verify import preflight, verify

    for command in (*COMMANDS, verify, preflight, build, doctor):
        cli.add_command(command)


_register()


def _fail(message: str, code: int) -> int:
    click.echo(f"envtool: error: {message}", err=True)
    return code


def _interrupted(exc: BaseException | None) -> int:
    if isinstance(exc, Terminated):
        return _fail("terminated (SIGTERM)", EXIT_TERMINATED)
    return _fail("interrupted", EXIT_INTERRUPTED)


def _raise_terminated(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one is enough: cleanup must not be cut short
    raise Terminated()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code; the only place exceptions become exit codes."""
    try:
        rv = cli.main(
            args=list(argv) if argv is not None else None,
            prog_name="envtool",
            standalone_mode=False,
        )
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return EXIT_BAD_INPUT if isinstance(exc, click.UsageError) else exc.exit_code
    except click.exceptions.Abort as exc:  # click turns a KeyboardInterrupt into Abort
        return _interrupted(exc.__context__)
    except EnvtoolError as exc:
        return _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    except Exception as exc:  # the last resort: one line, a traceback only on request
        if os.environ.get("ENVTOOL_DEBUG", "") not in ("", "0"):
            import traceback

            traceback.print_exc()  # the same exit code with or without the traceback
        return _fail(
            f"internal error: {type(exc).__name__}: {exc} (ENVTOOL_DEBUG=1 for a traceback)",
            EXIT_INTERNAL,
        )
    return int(rv) if isinstance(rv, int) else EXIT_OK


def entry() -> None:
    """Console-script entry point; SIGTERM stops envtool as Ctrl-C does (cleanup, exit 143)."""
    signal.signal(signal.SIGTERM, _raise_terminated)
    code = main()
    if "rattler" in sys.modules:
        # rattler's runtime threads can abort the interpreter while it finalizes (seen about
        # once in 40 runs): flush and leave without finalizing once the work is done.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
