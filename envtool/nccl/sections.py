"""A saved log cut into its nccl-tests runs: one binary's output each. Pure.

People run several collectives from one batch script into one file. Each binary prints, from
NVIDIA/nccl-tests' ``writeDeviceReport`` (``src/util.cu``, commit a0b82b2; ``run()`` in
``src/common.cu`` before 2.17.6): ``# nccl-tests version ...`` (from 2.17.6, commit 9641693),
``# Collective test starting: NAME`` (from 2.16.7, commit dafb704), ``# nThread ...``, its
devices and table, the trailer and ``# Collective test concluded: NAME``. A run begins at the
first of those header lines that cannot belong to the run before it: the version line when
the run before has any header line or row, the starting line when it has a starting line, a
``# nThread`` line or a row, the ``# nThread`` line when it has one or a row (older logs carry
only that). Lines between runs (the script's echoes, launcher noise) stay with the run before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from envtool.nccl.lines import Kind, Line

VERSION = "nccl-tests version"
STARTING = "Collective test starting:"
CONCLUDED = "Collective test concluded:"
_TRAILER = ("Out of bounds values", "Avg bus bandwidth")
_ORDER = {VERSION: 0, STARTING: 1, "nThread": 2}  # header lines, in the order printed


def body(line: Line) -> str:
    """A comment line's text after its '#'."""
    return line.text[1:].strip()


def _header(line: Line) -> int | None:
    """Where a line stands in a run's header (None: not a header line)."""
    if line.kind is not Kind.COMMENT:
        return None
    text = body(line)
    return next((rank for key, rank in _ORDER.items() if text.startswith(key)), None)


@dataclass
class _Run:
    lines: list[Line]
    seen: int = -1  # the latest header line seen (3: a row or the trailer)


def split(lines: Sequence[Line]) -> list[tuple[Line, ...]]:
    """The log's runs, in order, every line in one of them (one run when it holds one)."""
    runs = [_Run([])]
    for line in lines:
        rank = _header(line)
        current = runs[-1]
        if rank is not None and current.seen >= rank:
            current = _Run([])
            runs.append(current)
        current.lines.append(line)
        if rank is not None:
            current.seen = max(current.seen, rank)
        elif line.kind is Kind.ROW or (
            line.kind is Kind.COMMENT and body(line).startswith(_TRAILER)
        ):
            current.seen = 3
    return [tuple(run.lines) for run in runs]


def program(lines: Sequence[Line]) -> str | None:
    """The binary a run's ``# Collective test starting:`` line names (None: no such line)."""
    for line in lines:
        if line.kind is Kind.COMMENT and body(line).startswith(STARTING):
            name = body(line)[len(STARTING) :].strip()
            return name or None
    return None
