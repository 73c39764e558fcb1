"""The node-side commands: ``export``, ``probe``, ``diff``, ``nccl-tests`` (added by cli)."""

from __future__ import annotations

from pathlib import Path

import click

from envtool.errors import EXIT_OK, EXIT_PROBLEMS

PathArg = click.Path(path_type=Path)


@click.command()
@click.option("--prefix", type=PathArg, help="Environment to export (default: $CONDA_PREFIX).")
@click.option("--name", help="Environment name to print (default: the prefix's folder name).")
@click.option("--no-builds", is_flag=True, help="name=version only, as conda's --no-builds.")
@click.option(
    "--format", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True
)
def export(prefix: Path | None, name: str | None, no_builds: bool, fmt: str) -> int:
    """Print a prefix's environment exactly as `conda env export` does."""
    from envtool import probes, report

    doc = probes.export_prefix(probes.default_prefix(prefix), name=name, no_builds=no_builds)
    report.export_document(doc, fmt)
    return EXIT_OK


@click.command()
@click.option("--prefix", type=PathArg, help="Run the probes with this environment's python.")
@click.option(
    "--allreduce/--no-allreduce",
    default=True,
    show_default=True,
    help="Also run the all-reduce bandwidth test (torchrun --standalone).",
)
@click.option("--nproc", type=int, default=0, help="All-reduce processes (default: GPUs, else 2).")
@click.option("-b", "minbytes", default="8", show_default=True, help="Smallest size.")
@click.option("-e", "maxbytes", default="32M", show_default=True, help="Largest size.")
@click.option("-f", "stepfactor", type=int, default=2, show_default=True, help="Size factor.")
@click.option("-n", "iters", type=int, default=20, show_default=True, help="Timed iterations.")
@click.option("-w", "warmup", type=int, default=5, show_default=True, help="Warm-up iterations.")
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Deadline (s).")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option("--plot", type=PathArg, help="Also draw busbw against message size into this PNG.")
def probe(
    prefix: Path | None,
    allreduce: bool,
    nproc: int,
    minbytes: str,
    maxbytes: str,
    stepfactor: int,
    iters: int,
    warmup: int,
    timeout: float,
    fmt: str,
    plot: Path | None,
) -> int:
    """Probe this machine: CUDA, devices, driver, NCCL, and an all-reduce test."""
    from envtool import probes, report
    from envtool.errors import InputError

    if plot is not None and not allreduce:
        raise InputError("--plot draws the all-reduce: it cannot be used with --no-allreduce")

    sweep = [
        "-b",
        minbytes,
        "-e",
        maxbytes,
        "-f",
        str(stepfactor),
        "-n",
        str(iters),
        "-w",
        str(warmup),
        "--timeout",
        str(timeout),
    ] + (["--nproc", str(nproc)] if nproc else [])
    result = probes.probe_local(prefix, sweep if allreduce else None, timeout)
    report.probe_result(result, fmt)
    if plot is not None:
        from envtool import nccl
        from envtool import plot as plot_mod

        plot_mod.busbw_png(probes.allreduce_run(result), plot, nccl.parse_size("256M"))
        report.wrote(plot)
    return EXIT_OK if probes.probe_ok(result) else EXIT_PROBLEMS


@click.command()
@click.argument("a")
@click.argument("b")
@click.option(
    "--platform", default="linux-64", show_default=True, help="Platform of a lockfile argument."
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def diff(a: str, b: str, platform: str, fmt: str) -> int:
    """Compare two environments: lockfiles, exports, prefixes or probe JSON (A is the reference)."""
    from envtool import drift, envread, report

    left, right = envread.load(a, platform), envread.load(b, platform)
    findings = drift.diff(left, right)
    report.diff_result(left, right, findings, fmt)
    return EXIT_PROBLEMS if findings else EXIT_OK


@click.command("nccl-tests")
@click.argument("file", type=PathArg)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--large",
    default="256M",
    show_default=True,
    help="Sizes from here up count as large for the peak busbw.",
)
@click.option("--plot", type=PathArg, help="Also draw busbw against message size into this PNG.")
def nccl_tests(file: Path, fmt: str, large: str, plot: Path | None) -> int:
    """Read an all_reduce_perf log (nccl-tests or envtool's): rows and peak busbw; exit 1
    when it counted wrong elements."""
    from envtool import nccl, report, yamlio

    run = nccl.parse(yamlio.read_text(file, "nccl-tests log"), str(file))
    report.nccl_result(run, nccl.parse_size(large), fmt)
    if plot is not None:
        from envtool import plot as plot_mod

        plot_mod.busbw_png(run, plot, nccl.parse_size(large))
        report.wrote(plot)
    corrupt = bool(nccl.wrong_total(run)) or bool(run.out_of_bounds)
    return EXIT_PROBLEMS if corrupt else EXIT_OK


COMMANDS = (export, probe, diff, nccl_tests)
