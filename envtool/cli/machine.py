"""Declarations of the commands about one machine or one file: ``export``, ``diff``,
``probe``, ``nccl-tests``, ``explain``."""

from __future__ import annotations

from pathlib import Path

import click

from envtool.cli import options as opt
from envtool.cli.options import PathArg


@click.command()
@click.option(
    "--prefix",
    type=PathArg,
    help="Environment to export (default: $CONDA_PREFIX, else the lock's env by name).",
)
@click.option("--name", help="Environment name to print (default: the prefix's folder name).")
@click.option("--no-builds", is_flag=True, help="name=version only, as conda's --no-builds.")
@opt.fmt("yaml", "json")
def export(prefix: Path | None, name: str | None, no_builds: bool, fmt: str) -> int:
    """Print a prefix's environment exactly as `conda env export` does."""
    from envtool.commands import export as command

    return command.run(prefix, name, no_builds, fmt)


@click.command()
@click.option(
    "--prefix",
    type=PathArg,
    help="Run the probes with this environment's python (default: $CONDA_PREFIX, else the "
    "lock's env by name; never envtool's own).",
)
@click.option(
    "--allreduce/--no-allreduce",
    default=True,
    show_default=True,
    help="Also run the all-reduce bandwidth test (its ranks also gather the facts).",
)
@click.option("--nproc", type=int, default=0, help="All-reduce processes (default: GPUs, else 2).")
@click.option("-b", "minbytes", default="8", show_default=True, help="Smallest size.")
@click.option("-e", "maxbytes", default="32M", show_default=True, help="Largest size.")
@click.option("-f", "stepfactor", type=int, default=2, show_default=True, help="Size factor.")
@click.option("-n", "iters", type=int, default=20, show_default=True, help="Timed iterations.")
@click.option("-w", "warmup", type=int, default=5, show_default=True, help="Warm-up iterations.")
@click.option(
    "-G",
    "cudagraph",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Capture the -n calls in a CUDA graph and time N replays (NCCL on GPUs; 0: eager).",
)
@click.option("--timeout", type=opt.SECONDS, default=300.0, show_default=True, help="Deadline (s).")
@opt.fmt("table", "json")
@opt.plot()
def probe(
    prefix: Path | None,
    allreduce: bool,
    nproc: int,
    minbytes: str,
    maxbytes: str,
    stepfactor: int,
    iters: int,
    warmup: int,
    cudagraph: int,
    timeout: float,
    fmt: str,
    plot: Path | None,
) -> int:
    """Probe this machine: CUDA, devices, driver, NCCL, and an all-reduce test."""
    from envtool.commands import probe as command

    return command.run(
        command.ProbeArgs(
            prefix,
            allreduce,
            nproc,
            minbytes,
            maxbytes,
            stepfactor,
            iters,
            warmup,
            timeout,
            fmt,
            plot,
            cudagraph,
        )
    )


_ENVIRONMENT = click.option(
    "--environment",
    "-e",
    default="default",
    show_default=True,
    help="Environment of a pixi.lock argument (other inputs hold one).",
)


@click.command()
@click.argument("a")
@click.argument("b")
@click.option(
    "--platform", default="linux-64", show_default=True, help="Platform of a lockfile argument."
)
@_ENVIRONMENT
@opt.fmt("table", "json")
@opt.show_all()
def diff(a: str, b: str, platform: str, environment: str, fmt: str, show_all: bool) -> int:
    """Compare two environments: lockfiles (conda-lock, pixi.lock), exports, spec lists
    (--from-history), prefixes or probe JSON (A is the reference)."""
    from envtool.commands import diff as command

    return command.run(a, b, platform, fmt, show_all, environment)


@click.command("check")
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--platform", default="linux-64", show_default=True, help="Platform of a lockfile argument."
)
@_ENVIRONMENT
@opt.fmt("table", "json")
def check_env(paths: tuple[str, ...], platform: str, environment: str, fmt: str) -> int:
    """Find the inconsistencies inside each environment (lockfile, export, prefix or probe
    JSON): two torches, CUDA majors mixed, two NCCLs, ... Exit 0 consistent, 1 not."""
    from envtool.commands import check_env as command

    return command.run(paths, platform, fmt, environment)


@click.command("nccl-tests")
@click.argument("file", type=PathArg)
@opt.fmt("table", "json")
@click.option(
    "--large",
    default="256M",
    show_default=True,
    help="Sizes from here up count as large for the peak busbw.",
)
@opt.plot()
def nccl_tests(file: Path, fmt: str, large: str, plot: Path | None) -> int:
    """Read an all_reduce_perf log (nccl-tests or envtool's): rows and peak busbw; exit 1
    when it counted wrong elements."""
    from envtool.commands import nccl_tests as command

    return command.run(file, fmt, large, plot)


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--report",
    "reports",
    type=PathArg,
    multiple=True,
    help="A saved `envtool verify --format json` report of the job's nodes: their findings "
    "are joined with the logs' (repeatable).",
)
@click.option(
    "--hosts",
    "hosts_spec",
    metavar="FILE|NODESET",
    help="Run `envtool verify` now on these hosts (a hosts file or node set) and join its "
    "findings with the logs' (as --report does).",
)
@click.option(
    "--transport",
    type=click.Choice(["ssh", "local", "slurm"]),
    default="ssh",
    show_default=True,
    help="--hosts: how the nodes are reached.",
)
@click.option("-F", "--ssh-config", type=PathArg, help="--hosts: ssh configuration file.")
@click.option("--prefix", help="--hosts: the environment's prefix on the nodes.")
@click.option(
    "--lockfile",
    type=PathArg,
    help="--hosts: the lock the nodes are compared with (default: none, nodes compared with "
    "each other).",
)
@click.option("--policy", "policy_file", type=PathArg, metavar="FILE", help="--hosts: as verify's.")
@click.option("--timeout", type=float, default=120.0, show_default=True, help="--hosts: per node.")
@opt.fmt("text", "json", "junit")
def explain(
    paths: tuple[str, ...],
    reports: tuple[Path, ...],
    hosts_spec: str | None,
    transport: str,
    ssh_config: Path | None,
    prefix: str | None,
    lockfile: Path | None,
    policy_file: Path | None,
    timeout: float,
    fmt: str,
) -> int:
    """Name what killed a job from its logs (files, folders, an `envtool collect` folder; -
    for stdin): the initiating event, its evidence lines and the fix, joined with the nodes'
    facts (--report, --hosts). Exit 0 no failure, 1 a cause named, 4 a failure with no
    established cause (the report says what evidence would settle it)."""
    from envtool.cluster.options import FanoutOptions
    from envtool.commands import explain as command
    from envtool.commands.verify import VerifyArgs

    verify = None
    if hosts_spec is not None:
        fan = FanoutOptions(transport=transport, timeout=timeout, ssh_config=ssh_config,
                            prefix=prefix)  # fmt: skip
        verify = VerifyArgs(hosts_spec, lockfile, fan, min_gpus=0, fmt="json",
                            policy_path=policy_file)  # fmt: skip
    return command.run(paths, fmt, reports, verify)


COMMANDS = (export, probe, diff, check_env, nccl_tests, explain)
