"""``envtool collect``'s report: one line of what was gathered where, then each file left out
and each part that failed (collect.json holds the same)."""

from __future__ import annotations

import time

import click

from envtool.gather.node import Outcome
from envtool.report.text import visible


def _since(epoch: float | None, source: str) -> str:
    if epoch is None:
        return "since boot (no job start known)"
    return f"since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(epoch))} ({source})"


def show(outcome: Outcome) -> None:
    """The summary on stdout."""
    r = outcome.record
    size = sum(f.bytes for f in r.files)
    said = f"; {len(r.left_out)} left out" if r.left_out else ""
    where = f"{outcome.folder} ({outcome.placed})"
    kernel = _since(r.since, r.since_from)
    click.echo(visible(f"collected {len(r.files)} files ({size:,} bytes) into {where}, "
                       f"kernel log {kernel}{said}"))  # fmt: skip
    for entry in r.left_out:
        click.echo(visible(f"  left out: {entry.origin}: {entry.why}"))
    for error in r.errors:
        click.echo(visible(f"  not gathered: {error}"))
