"""One ``all_reduce_perf`` table row, in each layout nccl-tests printed over the years. Pure.

From NVIDIA/nccl-tests' printing code (``src/common.cu``; ``src/util.cu`` from 2025):

- before 2.13: ``%12li  %12li  %8s  %6s`` (size, count, type, redop), then out-of-place and
  in-place ``  %7s  %6.2f  %6.2f  %5.0le``: time, algbw, busbw and the largest difference
  from the expected values (``N/A`` without ``-c 1``): 12 fields.
- 2.13 on: a ``%6i`` root after redop, and ``#wrong`` (a count of wrong elements, ``%5li``,
  later ``%6g``) where the difference was: 13 fields.
- 2.19.2 on, with ``-I 1``: each placement adds ``  %7s  %7s  %7s  %7s`` (i_min, i_max,
  i_p99 in us, i_cv%): 21 fields.
- a ``YYYY-MM-DD HH:MM:SS`` timestamp (``-T``) may end a row.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from envtool.nccl.lines import INT_RE
from envtool.nccl.model import (
    COLUMNS,
    COLUMNS_OLD,
    COLUMNS_PER_ITER,
    IterTimes,
    NcclResult,
    NcclRow,
)

LAYOUTS = (COLUMNS_OLD, COLUMNS, COLUMNS_PER_ITER)
_FLOAT = re.compile(r"[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?")
_STAMP = (re.compile(r"\d{4}-\d\d-\d\d"), re.compile(r"\d\d:\d\d:\d\d"))


class RowError(ValueError):
    """A row that cannot be read; the caller adds where it is."""


def short(line: str) -> str:
    """A line quoted for a one-line message."""
    return repr(line.strip()[:80])


def tokens(line: str) -> list[str]:
    """The row's fields, a trailing ``YYYY-MM-DD HH:MM:SS`` timestamp left off."""
    fields = line.split()
    day, clock = _STAMP
    if len(fields) > 2 and day.fullmatch(fields[-2]) and clock.fullmatch(fields[-1]):
        return fields[:-2]
    return fields


def _int(name: str, token: str) -> int:
    if not INT_RE.fullmatch(token):
        raise RowError(f"{name} is not an integer: {token!r}")
    return int(token)


def number(name: str, token: str) -> float:
    """A finite non-negative number as nccl-tests prints one; RowError otherwise."""
    if not _FLOAT.fullmatch(token) or not math.isfinite(float(token)):
        raise RowError(f"{name} is not a non-negative number: {token!r}")
    return float(token)


def _wrong(token: str) -> int | None:
    if token == "N/A":
        return None
    value = number("#wrong", token)  # printed with %g from 2025: 1e+06 is possible
    if value != int(value):
        raise RowError(f"#wrong is not a whole count: {token!r}")
    return int(value)


def _error(token: str) -> float | None:
    return None if token == "N/A" else number("error", token)


def _placement(fields: Sequence[str], columns: int) -> NcclResult:
    time_us, algbw = number("time", fields[0]), number("algbw", fields[1])
    busbw = number("busbw", fields[2])
    if columns == COLUMNS_OLD:
        return NcclResult(time_us, algbw, busbw, None, _error(fields[3]))
    per_iter = None
    if columns == COLUMNS_PER_ITER:
        names = ("i_min", "i_max", "i_p99", "i_cv%")
        per_iter = IterTimes(*(number(n, t) for n, t in zip(names, fields[4:8], strict=True)))
    return NcclResult(time_us, algbw, busbw, _wrong(fields[3]), None, per_iter)


def parse_row(line: str, columns: int) -> NcclRow:
    """A row of ``columns`` fields (one of LAYOUTS); RowError when it is not one."""
    fields = tokens(line)
    if len(fields) != columns:
        raise RowError(f"row has {len(fields)} fields, expected {columns}: {short(line)}")
    size, count = _int("size", fields[0]), _int("count", fields[1])
    if size < 0 or count < 0:
        raise RowError(f"negative size or count: {short(line)}")
    root = -1 if columns == COLUMNS_OLD else _int("root", fields[4])  # no root column then
    head = 4 if columns == COLUMNS_OLD else 5
    width = (columns - head) // 2
    oop = _placement(fields[head : head + width], columns)
    ip = _placement(fields[head + width :], columns)
    return NcclRow(size, count, fields[2], fields[3], root, oop, ip)


def layout_of(line: str) -> int:
    """The layout a file's first row sets for all of its rows; RowError for no known one."""
    count = len(tokens(line))
    if count not in LAYOUTS:
        known = ", ".join(map(str, LAYOUTS))
        raise RowError(f"row has {count} fields, expected one of {known}: {short(line)}")
    return count


def layout_of_names(line: str) -> int | None:
    """The layout the column-names line (``#  size  count  type ...``) announces, if any."""
    names = [n for n in line.lstrip("#").split() if n != "timestamp"]
    if names[:1] in (["size"], ["bytes"]) and "algbw" in names and len(names) in LAYOUTS:
        return len(names)
    return None


def is_cut(line: str, columns: int | None) -> bool:
    """Whether a last row is shorter than the layout (the log ends inside it)."""
    count = len(tokens(line))
    if columns is None:
        return count not in LAYOUTS and count < max(LAYOUTS)
    return count < columns
