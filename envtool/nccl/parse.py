"""nccl-tests' text (``all_reduce_perf`` and the other collectives): parse real logs into
nccl/model.py's types. Pure.

A log as people save it: launcher prefixes and stray lines (nccl/lines.py), any of the row
layouts nccl-tests printed over the years (nccl/rows.py), possibly cut short, possibly several
collectives' runs one after the other (nccl/sections.py). Lines that are not nccl-tests output
are skipped and counted; a run whose rows are not followed by the ``# Avg bus bandwidth``
trailer is truncated (its last row may be cut mid-line). What the log did not say stays None:
nothing is filled in. Each run is named (nccl/collective.py); of several, the all_reduce one is
read and the others listed. The inverse, envtool's own layout, is report/nccl_text.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from envtool.errors import InputError, where
from envtool.nccl import collective, sections
from envtool.nccl.lines import INT_RE, Kind, Line, read_lines
from envtool.nccl.model import ALL_REDUCE, COLUMNS, NcclDevice, NcclRow, NcclRun, Section
from envtool.nccl.rows import (
    RowError,
    is_cut,
    layout_of,
    layout_of_names,
    number,
    parse_row,
    short,
)
from envtool_node.perf import parse_size as _parse_size
from envtool_node.runtime import nccl_version

__all__ = ["INT_RE", "NO_COLON", "PARAM_KEYS", "parse", "parse_all_reduce", "parse_size"]

_DEVICE = re.compile(
    r"#\s*Rank\s+(\d{1,9})(?:\s+Group\s+(\d{1,9}))?\s+Pid\s+(\d{1,12})\s+on\s+(\S+)"
    r"\s+device\s+(\d{1,9})\s+\[([^\]]*)\]\s*(.*)"
)  # no Group before 2022-09
_RUN = re.compile(r"[A-Za-z ]+")  # where a key may be: letters and spaces
_VALUE = re.compile(r":?\s+(-?[0-9]\S*)")  # what follows a key
_LIBRARY = re.compile(r"nccl-library=(\d{1,9})\b")
NO_COLON = ("nThread", "nGpus", "minBytes", "maxBytes")
PARAM_KEYS = (*NO_COLON, "step", "warmup iters", "iters", "agg iters", "validation", "graph")


@dataclass
class _Builder:
    """Mutable state while reading one log; frozen into an NcclRun at the end."""

    source: str
    rows: list[NcclRow] = field(default_factory=list)
    columns: int | None = None  # the row layout: from the column names, else the first row
    params: tuple[tuple[str, str], ...] | None = None
    devices: list[NcclDevice] = field(default_factory=list)
    version: str | None = None  # the first "NCCL version X" line
    library: str | None = None  # newer headers: "nccl-library=22807"
    program: str | None = None  # "# Collective test starting: all_reduce_perf" (>= 2.16.7)
    avg: float | None = None
    oob: int | None = None
    skipped: int = 0

    def fail(self, number: int, message: str) -> InputError:
        return InputError(f"{where(self.source, number)}: {message}")


def _value(b: _Builder, n: int, line: str, name: str) -> str:
    value = line.partition(":")[2].split()
    if not value:
        raise b.fail(n, f"no value after {name}: {short(line)}")
    return value[0]


def _device(b: _Builder, n: int, line: str) -> NcclDevice:
    match = _DEVICE.fullmatch(line)
    if not match:
        raise b.fail(n, f"bad device line: {short(line)}")
    rank, group, pid, host, dev, bus, name = match.groups()
    group_ = None if group is None else int(group)
    return NcclDevice(int(rank), group_, int(pid), host, int(dev), bus, name.strip())


def param_pairs(text: str) -> list[tuple[str, str]]:
    """``nThread 1 ... warmup iters: 5`` -> [("nThread", "1"), ..., ("warmup iters", "5")].

    What ``re.findall(r"([A-Za-z][A-Za-z ]*?):?\\s+(-?[0-9]\\S*)")`` finds, keys stripped, in
    one pass: that regex retries its lazy key from every letter of a header without values,
    which took minutes on a 60 KB line. A key is the letters-and-spaces run before a value,
    from its first letter to its last one (or to a ':' right after its trailing spaces)."""
    pairs, pos = [], 0
    while run := _RUN.search(text, pos):
        start, end = run.span()
        first = end - len(run.group().lstrip(" "))  # the key's first letter
        last = start + len(run.group().rstrip(" "))  # after its last letter
        value = _VALUE.match(text, last) if first < last else None
        if value is None and first < last < end:  # "key  : 5": the ':' after the spaces
            value = _VALUE.match(text, end)
        if value is None:
            pos = end
            continue
        pairs.append((text[first:last], value.group(1)))
        pos = value.end()
    return pairs


def _params(b: _Builder, n: int, line: str) -> tuple[tuple[str, str], ...]:
    if b.params is not None:  # sections.split starts a new run at each: not reached
        raise b.fail(n, "a second '# nThread' header in one run")
    pairs = tuple(param_pairs(line[1:]))
    if not pairs or pairs[0][0] != "nThread":
        raise b.fail(n, f"bad '# nThread' header: {short(line)}")
    return pairs


def _trailer(b: _Builder, n: int, line: str, body: str) -> None:
    if body.startswith("Out of bounds values"):
        token = _value(b, n, line, "Out of bounds")
        if not INT_RE.fullmatch(token):
            raise b.fail(n, f"out-of-bounds count is not an integer: {token!r}")
        b.oob = int(token)
        return
    if b.avg is not None:
        raise b.fail(n, "a second 'Avg bus bandwidth' with no '# nThread' header between")
    token = _value(b, n, line, "Avg bus bandwidth")
    try:
        b.avg = number("Avg bus bandwidth", token)
    except RowError as exc:
        raise b.fail(n, str(exc)) from None


def _comment(b: _Builder, n: int, line: str) -> None:
    body = line[1:].strip()
    if body.startswith(sections.STARTING):
        b.program = b.program or body[len(sections.STARTING) :].strip() or None
    elif body.startswith(sections.CONCLUDED):
        pass  # the run's end; the next run's header starts the next one
    elif body.startswith("nThread"):
        b.params = _params(b, n, line)
    elif re.match(r"Rank\s", body):
        b.devices.append(_device(b, n, line))
    elif body.startswith(("Out of bounds values", "Avg bus bandwidth")):
        _trailer(b, n, line, body)
    elif library := _LIBRARY.search(body):
        b.library = nccl_version(int(library.group(1)))
    elif b.columns is None and not b.rows:
        b.columns = layout_of_names(body)


def _row(b: _Builder, line: Line, last: bool) -> None:
    """A row. The last one, with no trailer after it, may be where the log was cut: a
    short one is skipped then, not an error."""
    try:
        if b.avg is not None:
            raise RowError("a row after '# Avg bus bandwidth' with no '# nThread' header between")
        if last and is_cut(line.text, b.columns):
            b.skipped += 1
            return
        b.columns = b.columns or layout_of(line.text)
        b.rows.append(parse_row(line.text, b.columns))
    except RowError as exc:
        raise b.fail(line.number, str(exc)) from None


def _last_table_line(lines: Sequence[Line]) -> int:
    """Index of the last row or trailer line (-1: none)."""
    trailer = ("Out of bounds values", "Avg bus bandwidth")
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        if line.kind is Kind.ROW:
            return i
        if line.kind is Kind.COMMENT and line.text[1:].strip().startswith(trailer):
            return i
    return -1


def _read(lines: Sequence[Line], source: str) -> NcclRun:
    """One run's lines read; InputError (source:line) when it holds no table or a line of
    the table cannot be read."""
    b = _Builder(source)
    last = _last_table_line(lines)
    for i, line in enumerate(lines):
        if line.kind is Kind.ROW:
            _row(b, line, last=i == last)
        elif line.kind is Kind.COMMENT:
            _comment(b, line.number, line.text)
        elif line.kind is Kind.VERSION:
            b.version = b.version or line.version
        else:
            b.skipped += 1
    if not b.rows:
        filled = [line.number for line in lines if line.text]
        if not filled:
            raise b.fail(lines[0].number if lines else 1, "empty input, no nccl-tests output")
        stray = f" ({b.skipped} of {len(lines)} lines not nccl-tests output)" if b.skipped else ""
        raise b.fail(filled[-1], f"no nccl-tests data rows{stray}")
    nranks = max(d.rank for d in b.devices) + 1 if b.devices else None
    columns = b.columns or COLUMNS
    name, fits = collective.identify(b.program, b.rows, columns, nranks)
    return NcclRun(
        source, tuple(b.rows), b.params or (), tuple(b.devices), nranks, b.version or b.library,
        b.avg, b.oob, nccl_line=b.version, columns=columns, truncated=b.avg is None,
        skipped_lines=b.skipped, collective=name, program=b.program, fits=fits,
    )  # fmt: skip


@dataclass(frozen=True)
class _Part:
    """One run of a log of several: what was read of it, or why it could not be."""

    lines: tuple[Line, ...]
    run: NcclRun | None
    error: InputError | None

    @property
    def section(self) -> Section:
        first, last = self.lines[0].number, self.lines[-1].number
        if self.run is not None:
            r = self.run
            return Section(r.collective, r.program, first, last, r.fits)
        name = sections.program(self.lines)
        named = collective.from_program(name) if name else None
        return Section(named, name, first, last, (), str(self.error))


def _attempt(lines: tuple[Line, ...], source: str) -> _Part:
    try:
        return _Part(lines, _read(lines, source), None)
    except InputError as exc:
        return _Part(lines, None, exc)


def _one(parts: Sequence[_Part], source: str, which: list[int]) -> int | None:
    """The one run of ``which``; InputError when there are two (one all-reduce per input)."""
    if len(which) > 1:
        first, second = (parts[i].lines[0].number for i in which[:2])
        raise InputError(
            f"{where(source, second)}: a second all_reduce run (the first starts at line"
            f" {first}): one all_reduce run per input; split the log"
        )
    return which[0] if which else None


def _pick(parts: Sequence[_Part], source: str) -> int:
    """The all_reduce run; without one, the first that could be read (its error if none)."""
    sections_ = [p.section for p in parts]
    named = [i for i, s in enumerate(sections_) if s.collective == ALL_REDUCE]
    maybe = [i for i, s in enumerate(sections_) if s.collective is None and ALL_REDUCE in s.fits]
    chosen = _one(parts, source, named) if named else _one(parts, source, maybe)
    if chosen is None:
        chosen = next((i for i, p in enumerate(parts) if p.run is not None), 0)
    return chosen


def parse(text: str, source: str = "<text>") -> NcclRun:
    """Read nccl-tests output as saved; of a log of several runs, the all_reduce one (else
    the first), the others listed in ``skipped``. InputError (source:line) when the run read
    holds no table or a line of its table cannot be read."""
    lines, _ = read_lines(text)
    runs = sections.split(lines)
    if len(runs) == 1:
        return _read(runs[0], source)
    parts = [_attempt(run, source) for run in runs]
    chosen = _pick(parts, source)
    part = parts[chosen]
    if part.run is None:
        assert part.error is not None
        raise part.error
    others = tuple(p.section for i, p in enumerate(parts) if i != chosen)
    span = (part.lines[0].number, part.lines[-1].number)
    return replace(part.run, lines=span, skipped=others)


def parse_all_reduce(text: str, source: str = "<text>") -> NcclRun:
    """``parse``, where only an all-reduce will do (a baseline): InputError naming what the
    log holds otherwise."""
    return collective.require_all_reduce(parse(text, source))


def parse_size(text: str) -> int:
    """``"256M"`` -> 268435456 (envtool_node.perf's sizes); InputError on anything else."""
    try:
        return _parse_size(text)
    except ValueError as exc:
        raise InputError(str(exc)) from None
