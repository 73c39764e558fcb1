"""nccl-tests' ``all_reduce_perf`` text format: parse real logs (layout: nccl_format.py). Pure.

The layout follows nccl-tests' printing code (src/common.cu, 2.13 era, what the real logs show):
a row is ``%12li  %12li  %8s  %6s  %6i`` then, out-of-place and in-place, ``  %7s  %6.2f  %6.2f
%5g`` (time ``%7.2f`` below 100 us, ``%7.1f`` below 10000, else ``%7.0f``; ``#wrong`` is
``N/A`` without ``-c 1``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from envtool.errors import InputError, where

LARGE = 256 * 2**20  # FACTS: the tool's average understates the link; report >= 256 MiB apart
FIELDS = 13  # size count type redop root + 2 x (time algbw busbw #wrong)


@dataclass(frozen=True)
class NcclResult:
    """One placement (out-of-place or in-place) of one size."""

    time_us: float
    algbw: float
    busbw: float
    wrong: int | None  # None when the log says N/A (run without validation)


@dataclass(frozen=True)
class NcclRow:
    """One size of the sweep."""

    size: int
    count: int
    type: str
    redop: str
    root: int
    oop: NcclResult
    ip: NcclResult


@dataclass(frozen=True)
class NcclDevice:
    """A ``#  Rank N Group G Pid P on HOST device D [BUS] NAME`` line."""

    rank: int
    group: int
    pid: int
    host: str
    device: int
    bus: str
    name: str


@dataclass(frozen=True)
class NcclRun:
    """One ``all_reduce_perf`` run as read from its text output."""

    source: str
    rows: tuple[NcclRow, ...]
    params: tuple[tuple[str, str], ...] = ()  # the ``# nThread ...`` line, in order
    devices: tuple[NcclDevice, ...] = ()
    nranks: int | None = None  # highest rank + 1 from the device lines
    nccl_version: str | None = None
    avg_busbw: float | None = None  # the tool's own "Avg bus bandwidth"
    out_of_bounds: int | None = None

    @property
    def param_map(self) -> dict[str, str]:
        """The ``# nThread ...`` parameters as a dict."""
        return dict(self.params)


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
        b.library = _decode_version(int(library.group(1)))


def _decode_version(code: int) -> str:
    """NCCL_VERSION_CODE: major*10000 + minor*100 + patch (from 2.9; 1000-based before)."""
    if code >= 20900:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


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


def algbw_from(size_bytes: int, time_us: float) -> float:
    """Algorithm bandwidth in decimal GB/s: bytes / 1e9 per second."""
    if time_us <= 0:
        raise ValueError(f"time must be positive, got {time_us}")
    return size_bytes / 1e9 / (time_us / 1e6)


def busbw_from(algbw: float, nranks: int) -> float:
    """All-reduce bus bandwidth: algbw * 2(n-1)/n (0 for a single rank)."""
    if nranks < 1:
        raise ValueError(f"nranks must be at least 1, got {nranks}")
    return algbw * 2 * (nranks - 1) / nranks


def large_rows(run: NcclRun, min_bytes: int = LARGE) -> tuple[NcclRow, ...]:
    """The rows whose size is at least ``min_bytes``."""
    return tuple(row for row in run.rows if row.size >= min_bytes)


def peak_busbw(run: NcclRun, min_bytes: int = LARGE, *, in_place: bool = True) -> float | None:
    """Best busbw over rows >= min_bytes, out-of-place and (unless told not) in-place."""
    rows = large_rows(run, min_bytes)
    values = [r.oop.busbw for r in rows] + ([r.ip.busbw for r in rows] if in_place else [])
    return max(values) if values else None


def nccl_avg_busbw(rows: Sequence[NcclRow]) -> float:
    """nccl-tests' own average: mean busbw over every size, both placements."""
    values = [v for r in rows for v in (r.oop.busbw, r.ip.busbw)]
    return sum(values) / len(values) if values else 0.0


def wrong_total(run: NcclRun) -> int | None:
    """Wrong elements over every row and placement (None: the log has no validation)."""
    wrongs = [w for r in run.rows for w in (r.oop.wrong, r.ip.wrong) if w is not None]
    return sum(wrongs) if wrongs else None


def summary(run: NcclRun, min_bytes: int = LARGE) -> dict[str, Any]:
    """JSON-ready: every row, the peak at large sizes, the tool's average, version, devices."""
    big = large_rows(run, min_bytes)
    return {
        "source": run.source,
        "nccl_version": run.nccl_version,
        "nranks": run.nranks,
        "devices": [asdict(d) for d in run.devices],
        "params": run.param_map,
        "rows": [asdict(r) for r in run.rows],
        "large_min_bytes": min_bytes,
        "large_sizes": len(big),
        "peak_busbw": peak_busbw(run, min_bytes),
        "peak_busbw_oop": peak_busbw(run, min_bytes, in_place=False),
        "avg_busbw": run.avg_busbw,
        "out_of_bounds": run.out_of_bounds,
        "wrong_total": wrong_total(run),
    }


def parse_size(text: str) -> int:
    """``"256M"`` -> 268435456 (K/M/G/T are powers of two, as in nccl-tests' -b/-e)."""
    match = re.fullmatch(r"\s*([0-9]+)\s*([KMGT]?)(I?B)?\s*", text.upper())
    if not match:
        raise InputError(f"not a size: {text!r} (use e.g. 8, 64K, 256M, 1G)")
    return int(match.group(1)) << (10 * "_KMGT".index(match.group(2) or "_"))


# The column header with nccl-tests' own format strings (trailing blanks included).
