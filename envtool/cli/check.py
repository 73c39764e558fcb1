"""Declarations of the checks against the lock: ``verify`` (a cluster), ``preflight`` (a Slurm
allocation, from its job script) and ``doctor`` (this machine)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from envtool.cli import options as opt
from envtool.cli.options import SECONDS, PathArg

if TYPE_CHECKING:
    from envtool.cluster.options import FanoutOptions
    from envtool.commands.verify import VerifyArgs


@click.command()
@click.option(
    "--hosts",
    "hosts_spec",
    metavar="FILE|NODESET|-",
    help="Hosts file, node set (gpu[01-16]) or - for stdin; default: SLURM_JOB_NODELIST.",
)
@click.option("--no-lock", is_flag=True, help="Compare nodes with each other only.")
@opt.platform
@click.option(
    "--transport",
    type=click.Choice(["ssh", "local", "docker", "slurm"]),
    default="ssh",
    show_default=True,
)
@click.option(
    "--bundle-dir",
    default="",
    metavar="DIR",
    help="A shared folder the nodes read: the node package is copied there, not sent on stdin.",
)
@click.option("--partition", help="--transport slurm outside an allocation: srun's partition.")
@click.option("--time", "time_limit", help="--transport slurm outside an allocation: srun --time.")
@click.option("--image", help="--transport docker: run the probes in a new container of IMAGE.")
@click.option("--container", help="--transport docker: run the probes in a running container.")
@click.option(
    "--docker-run-arg",
    "docker_run_args",
    multiple=True,
    metavar="--OPTION=VALUE",
    help="--image: a docker run option in place of envtool's default of the same name "
    "(--shm-size=1g --ulimit=memlock=-1 --ulimit=stack=67108864 --network=none); one of "
    "--shm-size, --ipc, --network, --ulimit, --gpus, --runtime. Repeatable.",
)
@click.option(
    "--fanout",
    type=click.IntRange(min=1),
    help="Hosts probed at once (default: 64, or fewer where ulimit -n says so).",
)
@click.option("--connect-timeout", type=SECONDS, default=10.0, show_default=True)
@click.option(
    "--max-output",
    callback=opt.max_output,
    metavar="SIZE",
    default="16M",
    show_default=True,
    help="Bytes read from a node's stdout (and a 16th of it from stderr) before it is stopped.",
)
@click.option("-F", "--ssh-config", type=PathArg, help="ssh configuration file.")
@click.option("--ssh-option", multiple=True, metavar="KEY=VALUE", help="Extra ssh -o option.")
@click.option(
    "--insecure-no-host-key-check",
    is_flag=True,
    help="Disable ssh host-key checking (never the default).",
)
@opt.cluster_checks(allreduce="off", timeout=120.0)
@opt.policy
@click.option(
    "--tolerance",
    type=opt.FRACTION,
    default=0.10,
    show_default=True,
    help="Allowed busbw shortfall against --baseline.",
)
@opt.fmt("table", "json", "junit")
@click.option("--output", type=opt.OutArg, help="Write the report here instead of stdout.")
@opt.show_all()
@click.option(
    "--wide",
    is_flag=True,
    help="The findings as one grid (hosts, severity, kind, subject, expected, actual, fix) "
    "instead of a block each; still no wider than the terminal.",
)
def verify(
    hosts_spec: str | None,
    no_lock: bool,
    platform: str,
    transport: str,
    bundle_dir: str,
    partition: str | None,
    time_limit: str | None,
    image: str | None,
    container: str | None,
    docker_run_args: tuple[str, ...],
    fanout: int | None,
    connect_timeout: float,
    max_output: int,
    ssh_config: Path | None,
    ssh_option: tuple[str, ...],
    insecure_no_host_key_check: bool,
    policy_file: Path | None,
    tolerance: float,
    fmt: str,
    output: Path | None,
    show_all: bool,
    wide: bool,
    **checks: Any,
) -> int:
    """Probe every node in parallel and report drift from the lock and from each other."""
    from envtool.cluster.options import FanoutOptions
    from envtool.commands import verify as command

    c = opt.ClusterChecks.of(checks)
    if docker_run_args and image is None:
        raise click.UsageError("--docker-run-arg goes with --transport docker --image")
    slurm = tuple(f"--{k}={v}" for k, v in (("partition", partition), ("time", time_limit)) if v)
    fan = FanoutOptions(
        transport=transport,
        fanout=fanout or 0,
        connect_timeout=connect_timeout,
        timeout=c.timeout,
        ssh_config=ssh_config,
        ssh_options=ssh_option,
        strict_host_keys=not insecure_no_host_key_check,
        prefix=c.prefix,
        docker_target=image or container or "",
        docker_run=image is not None,
        docker_run_args=docker_run_args,  # the user's; verify's plan adds the defaults
        bundle_dir=bundle_dir,
        slurm_args=slurm,
        max_output=max_output,
        max_stderr=max(64 * 1024, max_output // 16),
    )
    args = _verify_args(c, hosts_spec, None if no_lock else c.lockfile, fan, platform,
                        tolerance, fmt, output, policy_file)  # fmt: skip
    return command.run(replace(args, show_all=show_all, wide=wide))


def _verify_args(
    c: opt.ClusterChecks,
    hosts_spec: str | None,
    lock_path: Path | None,
    fan: FanoutOptions,
    platform: str = "linux-64",
    tolerance: float = 0.10,
    fmt: str = "table",
    output: Path | None = None,
    policy_path: Path | None = None,
) -> VerifyArgs:
    from envtool.commands.verify import VerifyArgs
    from envtool.history.record import Recording

    return VerifyArgs(
        hosts_spec, lock_path, fan, platform, c.allreduce, c.allreduce_args, c.rdzv_endpoint,
        c.min_gpus, c.min_busbw, c.baseline, tolerance, fmt, output, c.junit_file,
        policy_path=policy_path, recording=Recording.of(c.history, c.record, c.metrics_file),
    )  # fmt: skip


@click.command()
@opt.cluster_checks(allreduce="cluster", timeout=300.0)
@click.option("--no-lock", is_flag=True, help="Compare nodes with each other only.")
@opt.platform
@click.option(
    "--quick",
    is_flag=True,
    help="This node only, for a Slurm Prolog/HealthCheckProgram: its GPUs, package records "
    "and network/limits, without torch or an all-reduce (no SLURM_JOB_ID needed).",
)
@click.option(
    "--drain-reason",
    is_flag=True,
    help="--quick: print only a one-line reason for scontrol's drain (nothing when healthy).",
)
@click.option(
    "--job-gpus",
    callback=opt.gpu_list,
    metavar="LIST",
    help="--quick in a job's Prolog: judge only these GPUs and the processes on them (indices "
    "or GPU-UUIDs, comma-separated, as SLURM_JOB_GPUS and CUDA_VISIBLE_DEVICES write them).",
)
@click.option(
    "--health",
    is_flag=True,
    help="--quick as a HealthCheckProgram: the GPUs' health, not whether processes hold them.",
)
@opt.policy
def preflight(
    no_lock: bool,
    platform: str,
    quick: bool,
    drain_reason: bool,
    job_gpus: tuple[str, ...],
    health: bool,
    policy_file: Path | None,
    **checks: Any,
) -> int:
    """Check this Slurm allocation before training starts (put it at the top of a job script);
    --quick: this node alone, in a Slurm prolog."""
    c = opt.ClusterChecks.of(checks)
    lock_path = None if no_lock else c.lockfile
    if quick:
        return _quick(c, lock_path, platform, drain_reason, policy_file, job_gpus, health)
    for flag, given in (("--drain-reason", drain_reason), ("--job-gpus", job_gpus),
                        ("--health", health)):  # fmt: skip
        if given:
            raise click.UsageError(f"{flag} goes with --quick")
    from envtool.cluster.options import FanoutOptions
    from envtool.commands import preflight as command

    fan = FanoutOptions(transport="slurm", timeout=c.timeout, prefix=c.prefix)
    return command.run(_verify_args(c, None, lock_path, fan, platform, policy_path=policy_file))


def _quick(
    c: opt.ClusterChecks,
    lock_path: Path | None,
    platform: str,
    drain_reason: bool,
    policy_file: Path | None,
    job_gpus: tuple[str, ...],
    health: bool,
) -> int:
    from envtool.commands import preflight_quick as command
    from envtool.history.record import Recording
    from envtool.judge.cluster_policy import ClusterPolicy
    from envtool.judge.quick import GpuScope

    source = click.get_current_context().get_parameter_source
    default = click.core.ParameterSource.DEFAULT
    cluster_only = ("allreduce", "allreduce_args", "rdzv_endpoint", "min_busbw", "baseline",
                    "junit_file")  # fmt: skip
    asked = [f"--{n.replace('_', '-')}" for n in cluster_only if source(n) is not default]
    if asked:
        raise click.UsageError(
            f"--quick runs no all-reduce and writes no JUnit: {', '.join(asked)}"
        )
    policy = ClusterPolicy()
    if policy_file is not None:
        from envtool import policy as policy_reader

        policy = policy_reader.read(policy_file)
    if job_gpus and health:
        raise click.UsageError("--job-gpus (a job's Prolog) or --health (no job), not both")
    prefix, scope = Path(c.prefix) if c.prefix else None, GpuScope(job_gpus, not health)
    recording = Recording.of(c.history, c.record, c.metrics_file)
    return command.run(command.QuickArgs(lock_path, prefix, platform, c.min_gpus, policy,
                                         drain_reason, scope, recording))  # fmt: skip


@click.command()
@opt.lockfile
@click.option(
    "--prefix",
    type=PathArg,
    help="The environment to check (default: environment.yml's name under the usual conda "
    "env dirs, else $CONDA_PREFIX).",
)
@opt.platform
@click.option(
    "--min-gpus",
    type=opt.COUNT,
    default=1,
    show_default=True,
    help="0: a CPU-only machine passes.",
)
@click.option(
    "--install", "install_missing", is_flag=True, help="Install a missing environment unasked."
)
@click.option("--fix", "fix", is_flag=True, help="First bring the prefix to the lock (as "
              "`envtool fix` does: a new generation, checked, switched in one step).")  # fmt: skip
@click.option("--ddp/--no-ddp", default=True, show_default=True, help="Run the DDP smoke test.")
@click.option(
    "--nproc",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="DDP smoke-test processes.",
)
@click.option("--timeout", type=SECONDS, default=180.0, show_default=True, help="DDP deadline (s).")
@click.option(
    "--master-port", type=opt.PORT, help="Port to check (default: $MASTER_PORT, else 29500)."
)
@click.option("--rdzv-port", type=opt.PORT, default=29400, show_default=True)
@opt.fmt("text", "json")
@opt.install_sources()
@opt.recording()
def doctor(
    lockfile: Path,
    prefix: Path | None,
    platform: str,
    min_gpus: int,
    install_missing: bool,
    fix: bool,
    ddp: bool,
    nproc: int,
    timeout: float,
    master_port: int | None,
    rdzv_port: int,
    fmt: str,
    channel_mirror: tuple[str, ...],
    allow_insecure_url: bool,
    history: Path | None,
    record: bool | None,
    metrics_file: Path | None,
) -> int:
    """Check this machine, step by step, and print the command that fixes each failure."""
    from envtool.commands import doctor as command
    from envtool.doctor.run import DoctorOptions
    from envtool.history.record import Recording

    options = DoctorOptions(
        lockfile, prefix, platform, min_gpus, ddp, nproc, timeout, master_port, rdzv_port,
        opt.mirrors(channel_mirror), allow_insecure_url,
    )  # fmt: skip
    return command.run(options, install_missing, fmt, fix,
                       Recording.of(history, record, metrics_file))  # fmt: skip


COMMANDS = (verify, preflight, doctor)
