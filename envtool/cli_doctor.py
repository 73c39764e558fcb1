"""``envtool doctor``: a new lab member's one command (registered by cli)."""

from __future__ import annotations

from pathlib import Path

import click

from envtool.errors import EXIT_OK, EXIT_PROBLEMS

PathArg = click.Path(path_type=Path)
PORT = click.IntRange(1, 65535)


@click.command()
@click.option("--lockfile", type=PathArg, default=Path("conda-lock.yml"), show_default=True)
@click.option(
    "--prefix",
    type=PathArg,
    help="The environment to check (default: environment.yml's name under the usual conda "
    "env dirs, else $CONDA_PREFIX).",
)
@click.option("--platform", default="linux-64", show_default=True)
@click.option(
    "--min-gpus",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="0: a CPU-only machine passes.",
)
@click.option(
    "--install", "install_missing", is_flag=True, help="Install a missing environment unasked."
)
@click.option("--ddp/--no-ddp", default=True, show_default=True, help="Run the DDP smoke test.")
@click.option(
    "--nproc",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="DDP smoke-test processes.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1.0),
    default=180.0,
    show_default=True,
    help="DDP deadline (s).",
)
@click.option("--master-port", type=PORT, help="Port to check (default: $MASTER_PORT, else 29500).")
@click.option("--rdzv-port", type=PORT, default=29400, show_default=True)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def doctor(
    lockfile: Path,
    prefix: Path | None,
    platform: str,
    min_gpus: int,
    install_missing: bool,
    ddp: bool,
    nproc: int,
    timeout: float,
    master_port: int | None,
    rdzv_port: int,
    fmt: str,
) -> int:
    """Check this machine, step by step, and print the command that fixes each failure."""
    from envtool import doctor as doctor_mod
    from envtool import report_doctor

    options = doctor_mod.DoctorOptions(
        lockfile, prefix, platform, min_gpus, ddp, nproc, timeout, master_port, rdzv_port
    )
    out = report_doctor.DoctorReport(fmt)
    done = doctor_mod.run(options, out.step, lambda p: install_missing or out.offer_install(p))
    out.finish(done)
    return EXIT_OK if doctor_mod.exit_ok(done) else EXIT_PROBLEMS
