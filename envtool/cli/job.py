"""Declarations of the commands about one job on this node: ``collect``."""

from __future__ import annotations

from pathlib import Path

import click

from envtool.cli.options import PathArg


@click.command()
@click.option(
    "--dest",
    type=PathArg,
    required=True,
    metavar="DIR",
    help="The shared folder the job's folder goes in (DIR/JOBID/HOST); it must exist.",
)
@click.option("--job-id", help="The job (default: $SLURM_JOB_ID).")
@click.option(
    "--since",
    metavar="EPOCH",
    help="Keep the kernel log from here, epoch seconds (default: the job's start).",
)
@click.option(
    "--fr",
    "fr",
    multiple=True,
    metavar="PREFIX",
    help="Flight-recorder dump prefix (files PREFIX*); repeatable (default: "
    "$TORCH_FR_DUMP_TEMP_FILE, $TORCH_NCCL_DEBUG_INFO_TEMP_FILE, else "
    "/tmp/nccl_trace_rank_).",
)
@click.option(
    "--error-file",
    "error_files",
    multiple=True,
    metavar="PATH|GLOB",
    help="torchelastic error file(s); repeatable (default: $TORCHELASTIC_ERROR_FILE).",
)
@click.option(
    "--kernel-log",
    metavar="FILE",
    help="Read this saved /dev/kmsg instead of this machine's kernel log.",
)
@click.option("--no-preflight", is_flag=True, help="No quick verify of the node.")
def collect(
    dest: Path,
    job_id: str | None,
    since: str | None,
    fr: tuple[str, ...],
    error_files: tuple[str, ...],
    kernel_log: str | None,
    no_preflight: bool,
) -> int:
    """Gather what a job left on this node (flight-recorder dumps, torchelastic error files,
    the kernel log since it started, a quick verify) into DIR/JOBID/HOST, for a Slurm Epilog
    or an srun step at the job's end. Exit 0 gathered (what was left out is listed)."""
    from envtool.commands import collect as command

    return command.run(
        command.CollectArgs(dest, job_id, since, fr, error_files, kernel_log, not no_preflight)
    )


COMMANDS = (collect,)
