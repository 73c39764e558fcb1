"""nccl-tests' all-reduce results as data: rows, devices, runs; peak and average busbw.

One definition of each figure: envtool's all-reduce probe documents and real
``all_reduce_perf`` logs both become these types (protocol/ and nccl/parse.py), and every
check, report and plot takes the peak from ``peak_busbw`` here. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from envtool_node.perf import LARGE


@dataclass(frozen=True)
class IterTimes:
    """The per-iteration columns of ``all_reduce_perf -I 1`` (nccl-tests >= 2.19.2)."""

    min_us: float
    max_us: float
    p99_us: float
    cv_pct: float  # standard deviation over mean, in percent


@dataclass(frozen=True)
class NcclResult:
    """One placement (out-of-place or in-place) of one size."""

    time_us: float
    algbw: float
    busbw: float
    wrong: int | None  # None when the log says N/A (no validation) or has no #wrong column
    max_error: float | None = None  # nccl-tests < 2.13: the largest difference, not a count
    per_iter: IterTimes | None = None


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
    group: int | None  # None: the line has no Group (nccl-tests before 2022-09)
    pid: int
    host: str
    device: int
    bus: str
    name: str


COLUMNS_OLD, COLUMNS, COLUMNS_PER_ITER = 12, 13, 21  # fields in a row, by nccl-tests era
ALL_REDUCE = "all_reduce"


@dataclass(frozen=True)
class Section:
    """One run of a log that holds several (one nccl-tests binary each), left unread."""

    collective: str | None  # all_gather, sendrecv, ...; None: not known
    program: str | None  # the binary its "# Collective test starting:" line names
    first_line: int
    last_line: int
    fits: tuple[str, ...] = ()  # without that line: the collectives its rows fit
    error: str | None = None  # why its rows could not be read (it stays skipped)


@dataclass(frozen=True)
class NcclRun:
    """One nccl-tests run (``all_reduce_perf`` or another collective) as read from its text
    output: only what the text said (a header, a trailer, a version the log lacks stay None;
    nothing is filled in)."""

    source: str
    rows: tuple[NcclRow, ...]
    params: tuple[tuple[str, str], ...] = ()  # the ``# nThread ...`` line, in order
    devices: tuple[NcclDevice, ...] = ()
    nranks: int | None = None  # highest rank + 1 from the device lines
    nccl_version: str | None = None  # an "NCCL version X" line, else the nccl-tests banner's
    avg_busbw: float | None = None  # the tool's own "Avg bus bandwidth"
    out_of_bounds: int | None = None
    nccl_line: str | None = None  # X of the text's own "NCCL version X" line
    columns: int = COLUMNS  # the row layout: COLUMNS_OLD, COLUMNS or COLUMNS_PER_ITER
    truncated: bool = False  # rows but no "# Avg bus bandwidth" after them: the log was cut
    skipped_lines: int = 0  # lines that are not nccl-tests output (blank ones included)
    collective: str | None = ALL_REDUCE  # what the run measured; None: the log cannot tell
    program: str | None = None  # the binary its "# Collective test starting:" line names
    fits: tuple[str, ...] = ()  # not named by the log: the collectives its rows fit
    lines: tuple[int, int] | None = None  # its first and last line, in a log of several runs
    skipped: tuple[Section, ...] = ()  # the log's other runs, not read

    @property
    def may_be_all_reduce(self) -> bool:
        """Whether the run is (or, its rows not telling all_reduce from another, may be) an
        all-reduce: what a baseline needs."""
        return self.collective == ALL_REDUCE or (
            self.collective is None and ALL_REDUCE in self.fits
        )

    @property
    def param_map(self) -> dict[str, str]:
        """The ``# nThread ...`` parameters as a dict."""
        return dict(self.params)


def large_rows(rows: Sequence[NcclRow], min_bytes: int = LARGE) -> tuple[NcclRow, ...]:
    """The rows whose size is at least ``min_bytes``."""
    return tuple(row for row in rows if row.size >= min_bytes)


def large_floor(rows: Sequence[NcclRow], large: int = LARGE) -> int:
    """Where "large sizes" start for a sweep: ``large``, or its largest size when it stops
    short of that (a quick run's peak is taken at the sizes it ran)."""
    sizes = [r.size for r in rows]
    return min(large, max(sizes)) if sizes else large


def peak_busbw(
    rows: Sequence[NcclRow], min_bytes: int = LARGE, *, in_place: bool = True
) -> float | None:
    """Best busbw over rows >= min_bytes, out-of-place and (unless told not) in-place: the
    figure compared with a link's peak, a ``--min-busbw`` or a baseline."""
    big = large_rows(rows, min_bytes)
    values = [r.oop.busbw for r in big] + ([r.ip.busbw for r in big] if in_place else [])
    return max(values) if values else None


@dataclass(frozen=True)
class Peak:
    """The best busbw of a sweep and the size where it was reached; ``bandwidth_bound``: at
    sizes >= the large floor, else the sweep stopped below it (the best of what it ran)."""

    busbw: float
    size: int
    bandwidth_bound: bool


def _best(rows: Sequence[NcclRow], in_place: bool) -> tuple[float, int] | None:
    """The best busbw over ``rows`` and its size (the smaller size on a tie)."""
    best: tuple[float, int] | None = None
    for r in rows:
        value = max(r.oop.busbw, r.ip.busbw) if in_place else r.oop.busbw
        if best is None or value > best[0]:
            best = (value, r.size)
    return best


def peak(rows: Sequence[NcclRow], min_bytes: int = LARGE, *, in_place: bool = True) -> Peak | None:
    """The peak a log is read for, always named: ``peak_busbw``'s figure and its size when the
    sweep reaches ``min_bytes``, else the best at the sizes it ran; None only without rows."""
    big = large_rows(rows, min_bytes)
    best = _best(big or rows, in_place)
    return None if best is None else Peak(best[0], best[1], bool(big))


def overall_peak(rows: Sequence[NcclRow]) -> tuple[float, int] | None:
    """The best busbw at any size, either placement, and its size (None without rows)."""
    return _best(rows, in_place=True)


def wrong_rows(rows: Sequence[NcclRow]) -> tuple[NcclRow, ...]:
    """The rows whose check counted wrong elements (out-of-place or in-place)."""
    return tuple(r for r in rows if (r.oop.wrong or 0) + (r.ip.wrong or 0) > 0)


def nccl_avg_busbw(rows: Sequence[NcclRow]) -> float:
    """nccl-tests' own average: mean busbw over every size, both placements."""
    values = [v for r in rows for v in (r.oop.busbw, r.ip.busbw)]
    return sum(values) / len(values) if values else 0.0


def wrong_total(rows: Sequence[NcclRow]) -> int | None:
    """Wrong elements over every row and placement (None: the log has no validation)."""
    wrongs = [w for r in rows for w in (r.oop.wrong, r.ip.wrong) if w is not None]
    return sum(wrongs) if wrongs else None
