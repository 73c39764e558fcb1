"""Writing to the terminal: one-line messages, JSON, tables, a progress bar, a build log.

Table cells are rich ``Text``: whatever a node or a file said is shown as text, never read
as console markup.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from envtool.report.text import visible

LOGGER = "envtool"  # -v: what envtool starts and each host's answer; -q: errors only
QUIET, NORMAL, VERBOSE = -1, 0, 1


def set_verbosity(level: int) -> None:
    """``-q``/``-v`` of any command: the ``envtool`` logger's level, and its one handler
    (stderr, ``envtool: ...`` lines; stdout stays the report)."""
    import logging

    logger = logging.getLogger(LOGGER)
    logger.setLevel({QUIET: logging.WARNING, NORMAL: logging.INFO}.get(level, logging.DEBUG))
    logger.propagate = False
    if not logger.handlers:
        handler = logging.StreamHandler()  # sys.stderr as it is when a line is written
        handler.setFormatter(logging.Formatter("envtool: %(message)s"))
        logger.addHandler(handler)


def quiet() -> bool:
    """``-q`` was given (or no command set a level: a library caller)."""
    import logging

    return logging.getLogger(LOGGER).getEffectiveLevel() > logging.INFO


def live() -> bool:
    """Progress may be drawn: stderr is a terminal, not CI, not ``-q``."""
    return sys.stderr.isatty() and not os.environ.get("CI") and not quiet()


def step(message: str) -> None:
    """A long step starts (a round of pairs, doctor's DDP run): one line on stderr, not -q."""
    if not quiet():
        click.echo(f"envtool: {visible(message)}", err=True)


def error(message: str) -> None:
    """One line on stderr: ``envtool: error: ...`` (whatever the message holds, one line)."""
    click.echo(f"envtool: error: {visible(message)}", err=True)


def notice(message: str) -> None:
    """One line for the user on stderr (stdout stays the report); none under ``-q``."""
    if not quiet():
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
        # the first column names each row: as wide as its longest name (at most 30), never cut
        widest = max([len(column), *(len(visible(r[0])) for r in rows if r)]) if i == 0 else 0
        grid.add_column(column, overflow="fold", no_wrap=i < 3, min_width=min(30, widest) or None)
    for row in rows:
        grid.add_row(*(Text(visible(cell)) for cell in row))
    return grid


def width() -> int:
    """The report's width: ``COLUMNS``, else the terminal's, else 100 (a file, a pipe, CI)."""
    return max(40, shutil.get_terminal_size((100, 24)).columns)


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A table on stdout, as wide as the terminal and never wider (cells fold)."""
    from rich.console import Console

    Console(width=width()).print(_grid(title, columns, rows))


def table_text(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], columns_wide: int = 0
) -> str:
    """The same table as plain text (no colour), for a file: ``columns_wide`` or 100 wide."""
    import io

    from rich.console import Console

    out = io.StringIO()
    grid = _grid(title, columns, rows)
    Console(file=out, width=columns_wide or 100, color_system=None).print(grid)
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
    """A progress bar on stderr while hosts answer: only on a terminal, and never in CI or
    when the report is JSON/JUnit (``quiet``)."""

    def __init__(self, total: int, quiet: bool = False) -> None:
        if live() and not quiet:
            from rich.progress import Progress as RichProgress

            self._live = RichProgress(transient=True)
            self._task = self._live.add_task("waiting for the hosts", total=total)

    def done(self, _: object) -> None:
        """One host answered."""
        if self._live is not None:
            self._live.advance(self._task)


class BuildLog(_Live):
    """The build log, streamed: the last line under a spinner on a terminal, else every line."""

    def __init__(self) -> None:
        self.quiet = quiet()
        if live():
            from rich.console import Console

            self._live = Console(stderr=True).status("docker build")

    def line(self, text: str) -> None:
        """One line of the build's output."""
        if self._live is not None:
            from rich.text import Text

            self._live.update(Text(visible(f"docker build: {text[:100]}")))
        elif not self.quiet:
            click.echo(visible(text), err=True)
