"""``envtool verify``: the cluster check (registered by cli)."""

from __future__ import annotations

from pathlib import Path

import click

from envtool.errors import EXIT_OK, EXIT_PROBLEMS

PathArg = click.Path(path_type=Path)
SECONDS = click.FloatRange(min=1.0)
COUNT = click.IntRange(min=0)
GBPS = click.FloatRange(min=0.0)


@click.command()
@click.option(
    "--hosts",
    "hosts_spec",
    metavar="FILE|NODESET|-",
    help="Hosts file, node set (gpu[01-16]) or - for stdin; default: SLURM_JOB_NODELIST.",
)
@click.option("--lockfile", type=PathArg, default=Path("conda-lock.yml"), show_default=True)
@click.option("--no-lock", is_flag=True, help="Compare nodes with each other only.")
@click.option("--platform", default="linux-64", show_default=True)
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
    help="A shared folder the nodes read: probes/ is copied there, not sent on stdin.",
)
@click.option("--partition", help="--transport slurm outside an allocation: srun's partition.")
@click.option("--time", "time_limit", help="--transport slurm outside an allocation: srun --time.")
@click.option("--image", help="--transport docker: run the probes in a new container of IMAGE.")
@click.option("--container", help="--transport docker: run the probes in a running container.")
@click.option(
    "--fanout",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Hosts probed at once.",
)
@click.option(
    "--timeout",
    type=SECONDS,
    default=120.0,
    show_default=True,
    help="Per-host deadline in seconds.",
)
@click.option("--connect-timeout", type=SECONDS, default=10.0, show_default=True)
@click.option("-F", "--ssh-config", type=PathArg, help="ssh configuration file.")
@click.option("--ssh-option", multiple=True, metavar="KEY=VALUE", help="Extra ssh -o option.")
@click.option(
    "--insecure-no-host-key-check",
    is_flag=True,
    help="Disable ssh host-key checking (never the default).",
)
@click.option(
    "--prefix",
    help="The environment's prefix on the nodes (default: the lock's env "
    "name under the usual conda env dirs, else $CONDA_PREFIX).",
)
@click.option(
    "--allreduce", type=click.Choice(["off", "node", "cluster"]), default="off", show_default=True
)
@click.option(
    "--allreduce-args",
    default="-b 8 -e 32M -f 4 -n 10 -w 2",
    show_default=True,
    help="all_reduce_perf-style flags for the all-reduce probe.",
)
@click.option(
    "--rdzv-endpoint",
    default="",
    metavar="HOST:PORT",
    help="--allreduce cluster: the c10d rendezvous (default: first host:29400).",
)
@click.option("--min-gpus", type=COUNT, default=1, show_default=True)
@click.option("--min-busbw", type=GBPS, help="Fail nodes whose all-reduce busbw (GB/s) is lower.")
@click.option("--baseline", type=PathArg, help="Earlier verify JSON report or nccl-tests log.")
@click.option(
    "--tolerance",
    type=click.FloatRange(0.0, 1.0),
    default=0.10,
    show_default=True,
    help="Allowed busbw shortfall against --baseline.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "junit"]),
    default="table",
    show_default=True,
)
@click.option("--output", type=PathArg, help="Write the report here instead of stdout.")
@click.option(
    "--junit",
    "junit_file",
    type=PathArg,
    help="Also write a JUnit report here (whatever --format is).",
)
def verify(
    hosts_spec: str | None,
    lockfile: Path,
    no_lock: bool,
    platform: str,
    transport: str,
    bundle_dir: str,
    partition: str | None,
    time_limit: str | None,
    image: str | None,
    container: str | None,
    fanout: int,
    timeout: float,
    connect_timeout: float,
    ssh_config: Path | None,
    ssh_option: tuple[str, ...],
    insecure_no_host_key_check: bool,
    prefix: str | None,
    allreduce: str,
    allreduce_args: str,
    rdzv_endpoint: str,
    min_gpus: int,
    min_busbw: float | None,
    baseline: Path | None,
    tolerance: float,
    fmt: str,
    output: Path | None,
    junit_file: Path | None,
) -> int:
    """Probe every node in parallel and report drift from the lock and from each other."""
    import shlex

    from envtool import hosts, install, remote, report
    from envtool import verify as verify_mod

    lock_path = None if no_lock else lockfile
    fan = remote.FanoutOptions(
        transport=transport,
        fanout=fanout,
        connect_timeout=connect_timeout,
        timeout=timeout,
        ssh_config=ssh_config,
        ssh_options=ssh_option,
        strict_host_keys=not insecure_no_host_key_check,
        prefix=prefix,
        env_name=install.env_name(lock_path),
        docker_target=image or container or "",
        docker_run=image is not None,
        bundle_dir=bundle_dir,
        slurm_args=tuple(
            f"--{k}={v}" for k, v in (("partition", partition), ("time", time_limit)) if v
        ),
    )
    host_list = hosts.resolve(hosts_spec)
    options = verify_mod.VerifyOptions(
        tuple(host_list),
        lock_path,
        platform,
        fan,
        allreduce,
        tuple(shlex.split(allreduce_args)),
        min_gpus,
        min_busbw,
        baseline,
        tolerance,
        rdzv_endpoint,
    )
    with report.Progress(len(host_list)) as progress:
        result = verify_mod.verify(options, progress.done)
    report.verify_result(result, fmt, output)
    if junit_file is not None:
        report.verify_result(result, "junit", junit_file)
    failed = any(f.severity == "error" for f in result.findings)
    return EXIT_PROBLEMS if failed else EXIT_OK


@click.command()
@click.option("--lockfile", type=PathArg, default=Path("conda-lock.yml"), show_default=True)
@click.option("--prefix", help="The environment's prefix on the nodes ({node}: the node name).")
@click.option(
    "--allreduce",
    type=click.Choice(["off", "node", "cluster"]),
    default="cluster",
    show_default=True,
)
@click.option("--allreduce-args", default="-b 8 -e 32M -f 4 -n 10 -w 2", show_default=True)
@click.option("--rdzv-endpoint", default="", metavar="HOST:PORT")
@click.option("--min-gpus", type=COUNT, default=1, show_default=True)
@click.option("--min-busbw", type=GBPS)
@click.option("--baseline", type=PathArg)
@click.option("--timeout", type=SECONDS, default=300.0, show_default=True)
@click.option("--junit", "junit_file", type=PathArg, help="Also write a JUnit report here.")
@click.pass_context
def preflight(
    ctx: click.Context,
    lockfile: Path,
    prefix: str | None,
    allreduce: str,
    allreduce_args: str,
    rdzv_endpoint: str,
    min_gpus: int,
    min_busbw: float | None,
    baseline: Path | None,
    timeout: float,
    junit_file: Path | None,
) -> int:
    """Check this Slurm allocation before training starts (put it at the top of a job script)."""
    import os

    from envtool.errors import InputError

    if not os.environ.get("SLURM_JOB_ID"):
        raise InputError(
            "preflight runs inside a Slurm allocation (sbatch/salloc): SLURM_JOB_ID is not set"
        )
    common = dict(
        lockfile=lockfile,
        prefix=prefix,
        allreduce=allreduce,
        allreduce_args=allreduce_args,
        rdzv_endpoint=rdzv_endpoint,
        min_gpus=min_gpus,
        min_busbw=min_busbw,
        baseline=baseline,
        timeout=timeout,
        transport="slurm",
        hosts_spec=None,
    )
    code: int = ctx.invoke(verify, **common, fmt="table", junit_file=junit_file)
    if code != 0:
        click.echo(
            "envtool preflight: this allocation's nodes are not ready for the job "
            "(see the findings above); stopping before training starts.",
            err=True,
        )
    return code
