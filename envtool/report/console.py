"""Writing to the terminal: one-line messages, JSON, tables, a progress bar, a build log.

Table cells are rich ``Text``: whatever a node or a file said is shown as text, never read
as console markup.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from envtool.report.text import visible


def error(message: str) -> None:
    """One line on stderr: ``envtool: error: ...`` (whatever the message holds, one line)."""
    click.echo(f"envtool: error: {visible(message)}", err=True)


def notice(message: str) -> None:
    """One line for the user on stderr (stdout stays the report)."""
    click.echo(visible(message), err=True)


def wrote(path: Path) -> None:
    """A file envtool wrote beside its report (a plot)."""
    click.echo(f"wrote {path}", err=True)


def echo_json(doc: object) -> None:
    """A JSON document on stdout (keys sorted, two-space indent)."""
    click.echo(json.dumps(doc, indent=2, sort_keys=True, allow_nan=False))


def _grid(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> Any:
    from rich.table import Table
    from rich.text import Text

    grid = Table(title=Text(visible(title)), title_justify="left", show_lines=False)
    for i, column in enumerate(columns):
        grid.add_column(column, overflow="fold", no_wrap=i < 3)
    for row in rows:
        grid.add_row(*(Text(visible(cell)) for cell in row))
    return grid


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A table on stdout, wide enough not to cut the first columns."""
    from rich.console import Console

    Console(width=max(160, shutil.get_terminal_size().columns)).print(_grid(title, columns, rows))


def table_text(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """The same table as plain text (no colour), for a file."""
    import io

    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=160, color_system=None).print(_grid(title, columns, rows))
    return out.getvalue()


class _Live:
    """A rich live display on stderr (started and stopped with the block), or nothing."""

    _live: Any = None

    def __enter__(self) -> Any:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()


class Progress(_Live):
    """A progress bar on stderr while hosts answer; silent when stderr is not a terminal."""

    def __init__(self, total: int) -> None:
        if sys.stderr.isatty() and total > 1:
            from rich.progress import Progress as RichProgress

            self._live = RichProgress(transient=True)
            self._task = self._live.add_task("probing hosts", total=total)

    def done(self, _: object) -> None:
        """One host answered."""
        if self._live is not None:
            self._live.advance(self._task)


class BuildLog(_Live):
    """The build log, streamed: the last line under a spinner on a terminal, else every line."""

    def __init__(self) -> None:
        if sys.stderr.isatty():
            from rich.console import Console

            self._live = Console(stderr=True).status("docker build")

    def line(self, text: str) -> None:
        """One line of the build's output."""
        if self._live is not None:
            from rich.text import Text

            self._live.update(Text(visible(f"docker build: {text[:100]}")))
        else:
            click.echo(visible(text), err=True)
