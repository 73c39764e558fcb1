"""``envtool build``: a Docker image with exactly the locked packages; ``--verify``: then
checked against the lock as ``verify --transport docker --image`` checks it (started as a job's
container), and pushed only when that check passes."""

from __future__ import annotations

from dataclasses import replace

from envtool import image
from envtool.cluster import docker_run
from envtool.cluster.options import FanoutOptions
from envtool.commands import verify
from envtool.errors import EXIT_OK
from envtool.lock.prefixes import env_name
from envtool.report import console, results


def check_args(
    options: image.BuildOptions, tag: str, run_args: tuple[str, ...]
) -> verify.VerifyArgs:
    """The verify of a fresh image: the lock it was built from, the image as host ``image``
    started with the job's docker run options (``run_args`` in place of the defaults), no GPU
    required of the build machine."""
    fan = FanoutOptions(transport="docker", docker_target=tag, docker_run=True,
                        docker_run_args=run_args)  # fmt: skip
    return verify.VerifyArgs("image", options.lock_path, fan, options.platform, min_gpus=0)


def run(options: image.BuildOptions, check: bool = False, run_args: tuple[str, ...] = ()) -> int:
    """Build (and push); the env name defaults to environment.yml's, else ``ddp``. ``check``:
    verify the image, its exit code the build's, and push only an image that passed."""
    if not options.env_name:
        options = replace(options, env_name=env_name(options.lock_path) or "ddp")
    if check:
        docker_run.options(run_args, gpus=False)  # a bad --docker-run-arg: exit 2, no build
    with console.BuildLog() as log:
        result = image.build(replace(options, push=options.push and not check), log.line)
    results.build_result(result)
    if not check:
        return EXIT_OK
    code = verify.run(check_args(options, result.tag, run_args))
    if options.push and code == EXIT_OK:
        with console.BuildLog() as log:
            image.push(result.tag, log.line)
    results.checked_build(result.tag, code == EXIT_OK, options.push)
    return code
