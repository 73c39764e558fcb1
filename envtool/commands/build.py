"""``envtool build``: a Docker image with exactly the locked packages."""

from __future__ import annotations

from dataclasses import replace

from envtool import image
from envtool.errors import EXIT_OK
from envtool.lock.prefixes import env_name
from envtool.report import console, results


def run(options: image.BuildOptions) -> int:
    """Build (and push); the env name defaults to environment.yml's, else ``ddp``."""
    if not options.env_name:
        options = replace(options, env_name=env_name(options.lock_path) or "ddp")
    with console.BuildLog() as log:
        result = image.build(options, log.line)
    results.build_result(result)
    return EXIT_OK
