"""Declarations of the fleet-over-time commands: ``history`` (with ``diff`` and ``prune``)
and ``metrics``."""

from __future__ import annotations

from pathlib import Path

import click

from envtool.cli import options as opt
from envtool.cli.options import PathArg


def _store(path: Path | None) -> Path:
    from envtool.history.store import default_path

    return path or default_path()


_HISTORY = click.option(
    "--history",
    "path",
    type=PathArg,
    metavar="PATH",
    help="The history store (default $ENVTOOL_HISTORY, else "
    "$XDG_STATE_HOME/envtool/history.sqlite).",
)


@click.group(invoke_without_command=True)
@_HISTORY
@click.option("--host", default="", help="Only this host.")
@click.option("--kind", default="", help="Only this finding kind (version-differs, ...).")
@click.option("--since", default="", metavar="WHEN", help="7d, 12h, 30m or an ISO date/time.")
@opt.fmt("text", "json")
@click.pass_context
def history(
    ctx: click.Context, path: Path | None, host: str, kind: str, since: str, fmt: str
) -> int:
    """Each finding's life on each host: first seen, last seen, cleared, how often back."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = _store(path)
        return 0
    from envtool.commands import history as command

    return command.run(command.HistoryArgs(_store(path), host, kind, since, fmt))


@history.command("diff")
@click.argument("run_a", type=click.IntRange(min=1))
@click.argument("run_b", type=click.IntRange(min=1))
@opt.fmt("text", "json")
@click.pass_obj
def history_diff(path: Path, run_a: int, run_b: int, fmt: str) -> int:
    """What changed on which host between two recorded runs (their ids: envtool history)."""
    from envtool.commands import history as command

    return command.diff(path, run_a, run_b, fmt)


@history.command("prune")
@click.option("--keep-days", type=click.IntRange(min=0), required=True, metavar="N")
@click.pass_obj
def history_prune(path: Path, keep_days: int) -> int:
    """Remove the runs older than N days."""
    from envtool.commands import history as command

    return command.prune(path, keep_days)


@click.command()
@_HISTORY
@click.option("--run", "run_id", type=click.IntRange(min=0), default=0, help="A run's id.")
def metrics(path: Path | None, run_id: int) -> int:
    """The latest recorded run's metrics, in node_exporter's textfile format."""
    from envtool.commands import history as command

    return command.show_metrics(_store(path), run_id)


COMMANDS = (history, metrics)
