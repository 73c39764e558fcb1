"""Declarations of the pin and build stage's commands: ``lock``, ``install``, ``build``."""

from __future__ import annotations

from pathlib import Path

import click

from envtool.cli import options as opt
from envtool.cli.options import PathArg


@click.command()
@click.option(
    "-f",
    "--file",
    "env_file",
    type=PathArg,
    default=Path("environment.yml"),
    show_default=True,
    help="The environment file to lock.",
)
@opt.lockfile
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
    from envtool.commands import lock as command

    return command.run(
        command.LockArgs(
            env_file,
            lockfile,
            platforms,
            channel_mirror,
            solver,
            conda_exe,
            virtual_package_spec,
            check,
            cache_dir,
        )
    )


@click.command()
@opt.lockfile
@click.option(
    "--prefix", type=PathArg, required=True, help="Environment directory to install into."
)
@opt.platform
@click.option("--allow-stale", is_flag=True, help="Install even if environment.yml changed.")
@click.option("--cache-dir", type=PathArg, help="Package cache.")
@click.option("--cache", "shared", type=PathArg, metavar="DIR", help="A package cache `envtool fix "
              "--cache` filled (read: what it lacks is downloaded into --cache-dir).")  # fmt: skip
@opt.install_sources()
def install(
    lockfile: Path,
    prefix: Path,
    platform: str,
    allow_stale: bool,
    cache_dir: Path | None,
    shared: Path | None,
    channel_mirror: tuple[str, ...],
    allow_insecure_url: bool,
) -> int:
    """Install a lockfile's packages (hashes checked) into a prefix."""
    from envtool.commands import install as command
    from envtool.lock import pkgcache
    from envtool.lock.install import InstallOptions
    from envtool.report.console import live

    options = InstallOptions(
        lockfile, prefix, platform, allow_stale, cache_dir, opt.mirrors(channel_mirror),
        allow_insecure_url, progress=live(),
        shared_cache=pkgcache.checked_dir(shared, create=False) if shared else None,
    )  # fmt: skip
    return command.run(options)


@click.command()
@opt.lockfile
@click.option("-t", "--tag", help="Image tag (default: envtool/<env-name>:<lock-hash-prefix>).")
@click.option("--base", help="Runtime base image (default: debian:bookworm-slim).")
@click.option("--builder-image", help="Builder image with python3 (default: python:3.11-slim).")
@click.option("--network", help="Network mode of the build's RUN steps (e.g. host, none).")
@click.option("--no-cache", is_flag=True, help="Rebuild every layer.")
@click.option("--push", is_flag=True, help="Push the tag after building.")
@click.option("--env-name", default="", help="Env name in the image (default: environment.yml's).")
@click.option(
    "--verify",
    "check",
    is_flag=True,
    help="Then check the image against the lock (envtool verify --transport docker --image TAG "
    "--hosts image --min-gpus 0); exit 1 on a finding, and --push only an image that passed.",
)
@click.option(
    "--docker-run-arg",
    "docker_run_args",
    multiple=True,
    metavar="--OPTION=VALUE",
    help="--verify: a docker run option in place of the default of its name (as verify's).",
)
@opt.platform
@opt.allow_insecure_url
def build(
    lockfile: Path,
    tag: str | None,
    base: str | None,
    builder_image: str | None,
    network: str | None,
    no_cache: bool,
    push: bool,
    env_name: str,
    check: bool,
    docker_run_args: tuple[str, ...],
    platform: str,
    allow_insecure_url: bool,
) -> int:
    """Build a Docker image with exactly the locked packages (multi-stage, hashes checked)."""
    from envtool import image
    from envtool.commands import build as command

    if docker_run_args and not check:
        raise click.UsageError("--docker-run-arg goes with --verify")
    install_args = ("--allow-insecure-url",) if allow_insecure_url else ()
    return command.run(
        image.BuildOptions(
            lockfile, tag, base, builder_image, network, no_cache, push, env_name, platform,
            install_args=install_args,
        ),
        check, docker_run_args,
    )  # fmt: skip


COMMANDS = (lock, install, build)
