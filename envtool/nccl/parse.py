"""nccl-tests' ``all_reduce_perf`` text: parse real logs into nccl/model.py's types. Pure.

The layout follows nccl-tests' printing code (src/common.cu, 2.13 era, what the real logs show):
a row is ``%12li  %12li  %8s  %6s  %6i`` then, out-of-place and in-place, ``  %7s  %6.2f  %6.2f
%5g`` (time ``%7.2f`` below 100 us, ``%7.1f`` below 10000, else ``%7.0f``; ``#wrong`` is
``N/A`` without ``-c 1``). The inverse, envtool's own layout, is report/nccl_text.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from envtool.errors import InputError, where
from envtool.nccl.model import NcclDevice, NcclResult, NcclRow, NcclRun
from envtool_node.perf import parse_size as _parse_size
from envtool_node.runtime import nccl_version

FIELDS = 13  # size count type redop root + 2 x (time algbw busbw #wrong)


_DEVICE = re.compile(
    r"#\s*Rank\s+(\d+)\s+Group\s+(\d+)\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)"
    r"\s+\[([^\]]*)\]\s*(.*)"
)
_PARAM = re.compile(r"([A-Za-z][A-Za-z ]*?):?\s+(-?[0-9]\S*)")
_VERSION = re.compile(r"\bNCCL version (\S+)")
_LIBRARY = re.compile(r"nccl-library=(\d+)")
_DEBUG = re.compile(r"\bNCCL (INFO|WARN|TRACE|ABORT)\b")
INT_RE = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?")
_STAMP = (re.compile(r"\d{4}-\d\d-\d\d"), re.compile(r"\d\d:\d\d:\d\d"))
NO_COLON = ("nThread", "nGpus", "minBytes", "maxBytes")
PARAM_KEYS = (*NO_COLON, "step", "warmup iters", "iters", "agg iters", "validation", "graph")


@dataclass
class _Builder:
    """Mutable state while reading one log; frozen into an NcclRun at the end."""

    source: str
    rows: list[NcclRow] = field(default_factory=list)
    params: tuple[tuple[str, str], ...] | None = None
    devices: list[NcclDevice] = field(default_factory=list)
    version: str | None = None  # the first "NCCL version X" line
    library: str | None = None  # newer headers: "nccl-library=22807"
    avg: float | None = None
    oob: int | None = None

    def fail(self, number: int, message: str) -> InputError:
        return InputError(f"{where(self.source, number)}: {message}")


def _short(line: str) -> str:
    return repr(line.strip()[:80])


def _int(b: _Builder, n: int, name: str, token: str) -> int:
    if not INT_RE.fullmatch(token):
        raise b.fail(n, f"{name} is not an integer: {token!r}")
    return int(token)


def _float(b: _Builder, n: int, name: str, token: str) -> float:
    if not _FLOAT.fullmatch(token) or not math.isfinite(float(token)):
        raise b.fail(n, f"{name} is not a non-negative number: {token!r}")
    return float(token)


def _wrong(b: _Builder, n: int, token: str) -> int | None:
    if token == "N/A":
        return None
    value = _float(b, n, "#wrong", token)  # nccl-tests prints it with %g: 1e+06 is possible
    if value != int(value):
        raise b.fail(n, f"#wrong is not a whole count: {token!r}")
    return int(value)


def _result(b: _Builder, n: int, tokens: Sequence[str]) -> NcclResult:
    return NcclResult(
        _float(b, n, "time", tokens[0]),
        _float(b, n, "algbw", tokens[1]),
        _float(b, n, "busbw", tokens[2]),
        _wrong(b, n, tokens[3]),
    )


def _without_stamp(tokens: list[str]) -> list[str]:
    """Newer nccl-tests can end a row with a ``YYYY-MM-DD HH:MM:SS`` timestamp."""
    day, clock = _STAMP
    extra = tokens[FIELDS:]
    if len(extra) == 2 and day.fullmatch(extra[0]) and clock.fullmatch(extra[1]):
        return tokens[:FIELDS]
    return tokens


def _row(b: _Builder, n: int, line: str) -> NcclRow:
    tokens = _without_stamp(line.split())
    if not INT_RE.fullmatch(tokens[0]):
        raise b.fail(n, f"not an all_reduce_perf row: {_short(line)}")
    if len(tokens) != FIELDS:
        raise b.fail(n, f"row has {len(tokens)} fields, expected {FIELDS}: {_short(line)}")
    size, count = _int(b, n, "size", tokens[0]), _int(b, n, "count", tokens[1])
    if size < 0 or count < 0:
        raise b.fail(n, f"negative size or count: {_short(line)}")
    root = _int(b, n, "root", tokens[4])
    oop, ip = _result(b, n, tokens[5:9]), _result(b, n, tokens[9:])
    return NcclRow(size, count, tokens[2], tokens[3], root, oop, ip)


def _device(b: _Builder, n: int, line: str) -> NcclDevice:
    match = _DEVICE.fullmatch(line)
    if not match:
        raise b.fail(n, f"bad device line: {_short(line)}")
    rank, group, pid, host, dev, bus, name = match.groups()
    return NcclDevice(int(rank), int(group), int(pid), host, int(dev), bus, name.strip())


def _params(b: _Builder, n: int, line: str) -> tuple[tuple[str, str], ...]:
    if b.params is not None:
        raise b.fail(n, "a second '# nThread' header: one all_reduce_perf run per input")
    pairs = tuple((k.strip(), v) for k, v in _PARAM.findall(line[1:]))
    if not pairs or pairs[0][0] != "nThread":
        raise b.fail(n, f"bad '# nThread' header: {_short(line)}")
    return pairs


def _after_colon(b: _Builder, n: int, line: str, name: str) -> str:
    value = line.partition(":")[2].split()
    if not value:
        raise b.fail(n, f"no value after {name}: {_short(line)}")
    return value[0]


def _comment(b: _Builder, n: int, line: str) -> None:
    body = line[1:].strip()
    if body.startswith("nThread"):
        b.params = _params(b, n, line)
    elif re.match(r"Rank\s", body):
        b.devices.append(_device(b, n, line))
    elif body.startswith("Out of bounds values"):
        b.oob = _int(b, n, "out-of-bounds count", _after_colon(b, n, line, "Out of bounds"))
    elif body.startswith("Avg bus bandwidth"):
        b.avg = _float(b, n, "Avg bus bandwidth", _after_colon(b, n, line, "Avg bus bandwidth"))
    elif library := _LIBRARY.search(body):
        b.library = nccl_version(int(library.group(1)))


def _line(b: _Builder, n: int, line: str) -> None:
    stripped = line.strip()
    if not stripped:
        return
    version = _VERSION.search(stripped)
    if version:
        b.version = b.version or version.group(1)
    elif stripped.startswith("#"):
        _comment(b, n, stripped)
    elif not _DEBUG.search(stripped):  # NCCL_DEBUG=INFO lines interleave with the table
        b.rows.append(_row(b, n, stripped))


def parse(text: str, source: str = "<text>") -> NcclRun:
    """Read ``all_reduce_perf`` output; InputError (source:line) on anything else."""
    b = _Builder(source)
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        _line(b, number, line)
    if not b.rows:
        filled = [i for i, line in enumerate(lines, 1) if line.strip()]
        if not filled:
            raise b.fail(1, "empty input, no all_reduce_perf output")
        raise b.fail(filled[-1], "no all_reduce_perf data rows")
    return NcclRun(
        source,
        tuple(b.rows),
        b.params or (),
        tuple(b.devices),
        max(d.rank for d in b.devices) + 1 if b.devices else None,
        b.version or b.library,
        b.avg,
        b.oob,
    )


def parse_size(text: str) -> int:
    """``"256M"`` -> 268435456 (envtool_node.perf's sizes); InputError on anything else."""
    try:
        return _parse_size(text)
    except ValueError as exc:
        raise InputError(str(exc)) from None
