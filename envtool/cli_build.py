"""``envtool build``: a Docker image from the lock (registered by cli)."""

from __future__ import annotations

from pathlib import Path

import click

from envtool.errors import EXIT_OK

PathArg = click.Path(path_type=Path)


@click.command()
@click.option("--lockfile", type=PathArg, default=Path("conda-lock.yml"), show_default=True)
@click.option("-t", "--tag", help="Image tag (default: envtool/<env-name>:<lock-hash-prefix>).")
@click.option("--base", help="Runtime base image (default: debian:bookworm-slim).")
@click.option("--builder-image", help="Builder image with python3 (default: python:3.11-slim).")
@click.option("--network", help="Network mode of the build's RUN steps (e.g. host, none).")
@click.option("--no-cache", is_flag=True, help="Rebuild every layer.")
@click.option("--push", is_flag=True, help="Push the tag after building.")
@click.option("--env-name", default="", help="Env name in the image (default: environment.yml's).")
@click.option("--platform", default="linux-64", show_default=True)
def build(
    lockfile: Path,
    tag: str | None,
    base: str | None,
    builder_image: str | None,
    network: str | None,
    no_cache: bool,
    push: bool,
    env_name: str,
    platform: str,
) -> int:
    """Build a Docker image with exactly the locked packages (multi-stage, hashes checked)."""
    from envtool import image, report
    from envtool.install import env_name as lock_env_name

    options = image.BuildOptions(
        lockfile,
        tag,
        base,
        builder_image,
        network,
        no_cache,
        push,
        env_name or lock_env_name(lockfile) or "ddp",
        platform,
    )
    with report.BuildLog() as log:
        result = image.build(options, log.line)
    report.build_result(result)
    return EXIT_OK
