"""The only module that prints: summaries of commands, and errors."""

from __future__ import annotations

import click

from envtool.install import InstallResult
from envtool.lock import CheckResult, LockResult


def error(message: str) -> None:
    """One line on stderr: ``envtool: error: ...``."""
    click.echo(f"envtool: error: {message}", err=True)


def lock_result(result: LockResult) -> None:
    """What ``envtool lock`` wrote."""
    for platform, conda, pip in result.counts:
        extra = f" + {pip} pip" if pip else ""
        click.echo(f"{platform}: {conda} conda{extra} packages")
    click.echo(f"wrote {result.lock_path} in {result.seconds:.2f} s")


def check_result(result: CheckResult) -> None:
    """Whether the lock is fresh against the environment file."""
    if result.fresh:
        click.echo(f"{result.lock_path} is up to date with {result.env_path}")
    else:
        click.echo(
            f"{result.lock_path} is stale for {', '.join(result.stale)}: {result.env_path} "
            f"changed; run 'envtool lock -f {result.env_path} --lockfile {result.lock_path}'"
        )


def install_result(result: InstallResult) -> None:
    """What ``envtool install`` put into the prefix."""
    extra = f" and {result.pip} pip" if result.pip else ""
    click.echo(
        f"installed {result.conda} conda{extra} packages into {result.prefix} "
        f"in {result.seconds:.2f} s"
    )
