"""Laying out rows in nccl-tests' text format (the inverse of nccl/parse.py).

The one text layout of all-reduce results: real logs read back (``format_run``) and
envtool's own probe (``format_allreduce``). A log is laid out with only what it said: its
own header, its row layout (nccl/rows.py), its trailer values, none of them made up when
the log lacked them. envtool's own measured run gets the header and trailer nccl-tests
would have printed (``format_rows``). Pure: ``parse(format_run(run))`` gives ``run`` back
(tested on the real logs).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict

from envtool.nccl.model import (
    COLUMNS,
    COLUMNS_OLD,
    COLUMNS_PER_ITER,
    IterTimes,
    NcclDevice,
    NcclResult,
    NcclRow,
    NcclRun,
    large_rows,
    nccl_avg_busbw,
    overall_peak,
    peak,
    peak_busbw,
    wrong_total,
)
from envtool.nccl.parse import INT_RE, NO_COLON, PARAM_KEYS
from envtool.protocol import schemas
from envtool.protocol.types import AllReduceResult
from envtool.report.text import visible

_PLACES = "           out-of-place                       in-place          "
_PLACES_PER_ITER = (
    "              out-of-place (+ per-iteration)"
    "                                in-place (+ per-iteration)"
)
_NAMES = ("time", "algbw", "busbw")
_UNITS = ("(us)", "(GB/s)", "(GB/s)")
_HEADERS = {  # the column lines as nccl-tests printed them, by row layout
    COLUMNS_OLD: (
        "# %10s  %12s  %8s  %6s " % ("", "", "", "") + _PLACES,  # noqa: UP031
        "# %10s  %12s  %8s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s"  # noqa: UP031
        % ("size", "count", "type", "redop", *(*_NAMES, "error") * 2),
        "# %10s  %12s  %8s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s"  # noqa: UP031
        % ("(B)", "(elements)", "", "", *(*_UNITS, "") * 2),
    ),
    COLUMNS: (
        "# %10s  %12s  %8s  %6s  %6s" % ("", "", "", "", "") + _PLACES,  # noqa: UP031
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s"  # noqa: UP031
        % ("size", "count", "type", "redop", "root", *(*_NAMES, "#wrong") * 2),
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s"  # noqa: UP031
        % ("(B)", "(elements)", "", "", "", *(*_UNITS, "") * 2),
    ),
    COLUMNS_PER_ITER: (
        "# %10s  %12s  %8s  %6s  %6s" % ("", "", "", "", "") + _PLACES_PER_ITER,  # noqa: UP031
        "# %10s  %12s  %8s  %6s  %6s" % ("size", "count", "type", "redop", "root")  # noqa: UP031
        + ("  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s" * 2)
        % ((*_NAMES, "#wrong", "i_min", "i_max", "i_p99", "i_cv%") * 2),
        "# %10s  %12s  %8s  %6s  %6s" % ("(B)", "(elements)", "", "", "")  # noqa: UP031
        + ("  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s" * 2)
        % ((*_UNITS, "", "(us)", "(us)", "(us)", "(%)") * 2),
    ),
}


def _time(us: float) -> str:
    if us >= 10000.0:
        return f"{us:7.0f}"
    return f"{us:7.1f}" if us >= 100.0 else f"{us:7.2f}"


def _fit(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: two decimals, then fewer, then an exponent, to fit ``width``."""
    for spec in (".2f", ".1f", ".0f"):
        text = f"{value:{width}{spec}}"
        if len(text) <= width:
            return text
    return f"{value:{width}.1e}"


def _token(name: str, value: str) -> str:
    """One word of the layout, shown as text (a log's control characters made visible)."""
    if not value or value.split() != [value]:
        raise ValueError(f"{name} must be one non-empty word, got {value!r}")
    return visible(value)


def _finite(values: Sequence[float], what: object) -> None:
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise ValueError(f"times and bandwidths must be finite and non-negative: {what}")


def _per_iter(r: NcclResult) -> str:
    """nccl-tests >= 2.19.2 with -I 1 (src/util.cu): getFloatStr widths, #wrong as %6g."""
    if r.per_iter is None:
        raise ValueError(f"a row of the per-iteration layout without its columns: {r}")
    t: IterTimes = r.per_iter
    times = (t.min_us, t.max_us, t.p99_us, t.cv_pct)
    _finite(times, t)
    wrong = "    N/A" if r.wrong is None else f"  {r.wrong:>6}"
    head = f"  {_fit(r.time_us, 7)}  {_fit(r.algbw, 6)}  {_fit(r.busbw, 6)}{wrong}"
    return head + "".join(f"  {_fit(v, 7)}" for v in times)


def _format_result(r: NcclResult, columns: int = COLUMNS) -> str:
    _finite((r.time_us, r.algbw, r.busbw), r)
    if columns == COLUMNS_PER_ITER:
        return _per_iter(r)
    if columns == COLUMNS_OLD:  # the largest difference, "%5.0le"
        check = "N/A" if r.max_error is None else f"{r.max_error:5.0e}"
    else:  # nccl-tests prints #wrong with %5g (1e+06 from a million on); %d keeps it exact
        check = "N/A" if r.wrong is None else str(r.wrong)
    return f"  {_time(r.time_us):>7}  {r.algbw:6.2f}  {r.busbw:6.2f}  {check:>5}"


def format_row(row: NcclRow, columns: int = COLUMNS) -> str:
    """One row in all_reduce_perf's layout of ``columns`` fields (no newline)."""
    kind, redop = _token("type", row.type), _token("redop", row.redop)
    head = f"{row.size:12d}  {row.count:12d}  {kind:>8}  {redop:>6}"
    if columns != COLUMNS_OLD:
        head += f"  {row.root:6d}"
    return head + _format_result(row.oop, columns) + _format_result(row.ip, columns)


def _defaults(rows: Sequence[NcclRow]) -> dict[str, str]:
    sizes = [r.size for r in rows] or [0]
    factor = sizes[1] // sizes[0] if len(sizes) > 1 and sizes[0] else 2
    return {
        "nThread": "1", "nGpus": "1", "minBytes": str(min(sizes)), "maxBytes": str(max(sizes)),
        "step": f"{factor}(factor)", "warmup iters": "5", "iters": "20", "agg iters": "1",
        "validation": "1", "graph": "0",
    }  # fmt: skip


def _measured_params(
    rows: Sequence[NcclRow], header: Mapping[str, object]
) -> tuple[tuple[str, str], ...]:
    """The header nccl-tests would print for envtool's own run: ``header`` over defaults."""
    values = {**_defaults(rows), **{k: str(v) for k, v in header.items()}}
    keys = [*PARAM_KEYS, *(k for k in header if k not in PARAM_KEYS)]
    return tuple((k, values[k]) for k in keys)


def _param_line(params: Sequence[tuple[str, str]]) -> str:
    for key, value in params:
        if not re.fullmatch(r"[A-Za-z][A-Za-z ]*", key) or not INT_RE.match(value) or " " in value:
            raise ValueError(f"bad all_reduce_perf parameter {key!r}: {value!r}")
    parts = (f"{k} {v}" if k in NO_COLON else f"{k}: {v}" for k, v in params)
    return "# " + " ".join(parts)


def _device_line(d: NcclDevice) -> str:
    group = "" if d.group is None else f" Group {d.group:2d}"  # none before 2022-09
    lead = "#   Rank" if d.group is None else "#  Rank"
    return (
        f"{lead} {d.rank:2d}{group} Pid {d.pid:6d} on {_token('host', d.host):>10}"
        f" device {d.device:2d} [{visible(d.bus)}] {visible(d.name)}"
    )


def _footer(run: NcclRun, error: str) -> list[str]:
    lines = [f"# error: {error}"] if error else []
    oob, avg = run.out_of_bounds, run.avg_busbw
    if oob is not None:
        lines.append(f"# {'Out of bounds values':<20} : {oob} {'FAILED' if oob else 'OK'}")
    if avg is not None:  # "%g %s" with no threshold check: a blank; then a "#" line
        lines += [f"# {'Avg bus bandwidth':<20} : {avg:g} ", "#"]
    return lines


def format_run(run: NcclRun, error: str = "") -> str:
    """A run laid out (again) in nccl-tests' layout, with the header, version line and
    trailer it holds and no other; ``error`` (envtool's own run) before the trailer. The
    binary's ``# Collective test starting/concluded:`` lines (src/util.cu) when it named one."""
    program = None if run.program is None else visible(run.program)
    lines = [f"# Collective test starting: {program}"] if program else []
    lines += [_param_line(run.params)] if run.params else []
    if run.devices:
        lines += ["#", "# Using devices", *(_device_line(d) for d in run.devices)]
    lines += [f"NCCL version {visible(run.nccl_line)}"] if run.nccl_line else []
    if run.columns not in _HEADERS:
        raise ValueError(f"no all_reduce_perf layout of {run.columns} columns")
    lines += ["#", *_HEADERS[run.columns], *(format_row(r, run.columns) for r in run.rows)]
    end = [f"# Collective test concluded: {program}"] if program else []
    return "\n".join([*lines, *_footer(run, error), *end]) + "\n"


def _measured(
    source: str,
    rows: Sequence[NcclRow],
    header: Mapping[str, object],
    devices: Sequence[NcclDevice],
    nccl_version: str | None,
    avg_busbw: float | None,
    out_of_bounds: int | None,
) -> NcclRun:
    """envtool's own run, with the header and trailer nccl-tests would have printed."""
    if out_of_bounds is None:  # nccl-tests counts the checks that found wrong elements
        out_of_bounds = sum(1 for r in rows for p in (r.oop, r.ip) if p.wrong)
    avg = nccl_avg_busbw(rows) if avg_busbw is None else avg_busbw
    nranks = len({d.rank for d in devices}) or None
    params = _measured_params(rows, header)
    return NcclRun(
        source, tuple(rows), params, tuple(devices), nranks, nccl_version, avg, out_of_bounds,
        nccl_line=nccl_version,
    )  # fmt: skip


def format_rows(
    rows: Sequence[NcclRow],
    header: Mapping[str, object],
    *,
    devices: Sequence[NcclDevice] = (),
    nccl_version: str | None = None,
    avg_busbw: float | None = None,
    out_of_bounds: int | None = None,
    error: str = "",
) -> str:
    """envtool's own run as a whole all_reduce_perf report: header (``# nThread`` keys over
    nccl-tests' defaults), devices, rows, a computed trailer."""
    run = _measured("envtool", rows, header, devices, nccl_version, avg_busbw, out_of_bounds)
    return format_run(run, error)


def run_of(ar: AllReduceResult, source: str) -> NcclRun:
    """envtool's all-reduce result as an nccl-tests run (for its text and its plot)."""
    p = dict(ar.params)
    header = {
        "minBytes": p.get("minbytes", 0),
        "maxBytes": p.get("maxbytes", 0),
        "step": f"{p.get('stepfactor', 2)}(factor)",
        "warmup iters": p.get("warmup_iters", 0),
        "iters": p.get("iters", 0),
        "graph": p.get("cudagraph", 0),  # -G: CUDA graph replays, as nccl-tests prints it
    }
    return _measured(source, ar.rows, header, ar.devices, None, ar.avg_busbw, ar.wrong_total)


ONE_RANK = (
    "one rank: nothing crosses a link (busbw is 0 by definition, algbw is a local copy); "
    "in-place calls move no data (their bandwidth is 0, their time the call's cost)"
)


def format_allreduce(ar: AllReduceResult) -> str:
    """envtool's all-reduce in all_reduce_perf's layout, its error (if any) before the footer;
    a one-rank run says what its figures are."""
    text = format_run(run_of(ar, "envtool probe"), ar.error)
    return text + (f"# {ONE_RANK}\n" if ar.nranks == 1 and ar.rows else "")


def nccl_document(run: NcclRun, min_bytes: int) -> dict[str, object]:
    """``envtool nccl-tests --format json``: the run as read (which collective; of a log of
    several, its lines and the runs skipped), its peak at large sizes and the size of it, and
    the best busbw at any size and its size."""
    overall = overall_peak(run.rows)
    return {
        "schema": schemas.NCCL_TESTS,
        "source": run.source,
        "collective": run.collective,
        "program": run.program,
        "collective_fits": list(run.fits),
        "lines": None if run.lines is None else list(run.lines),
        "skipped_runs": [asdict(s) for s in run.skipped],
        "nccl_version": run.nccl_version,
        "nranks": run.nranks,
        "devices": [asdict(d) for d in run.devices],
        "params": run.param_map,
        "rows": [asdict(r) for r in run.rows],
        "large_min_bytes": min_bytes,
        "large_sizes": len(large_rows(run.rows, min_bytes)),
        "peak_busbw": peak_busbw(run.rows, min_bytes),
        "peak_busbw_oop": peak_busbw(run.rows, min_bytes, in_place=False),
        "peak_size": _size_of(run.rows, min_bytes),
        "bandwidth_bound": bool(large_rows(run.rows, min_bytes)),
        "overall_peak_busbw": None if overall is None else overall[0],
        "overall_peak_size": None if overall is None else overall[1],
        "avg_busbw": run.avg_busbw,
        "out_of_bounds": run.out_of_bounds,
        "wrong_total": wrong_total(run.rows),
        "truncated": run.truncated,
        "skipped_lines": run.skipped_lines,
    }


def _size_of(rows: Sequence[NcclRow], min_bytes: int) -> int | None:
    """The size where ``peak_busbw`` was reached (None: no rows that large)."""
    found = peak(rows, min_bytes)
    return found.size if found is not None and found.bandwidth_bound else None


def reading_notes(run: NcclRun) -> list[str]:
    """What the reader could not take from the log, one line each (nothing when it was whole)."""
    notes = []
    if run.truncated:
        last = size_text(run.rows[-1].size) if run.rows else "?"
        notes.append(
            f"{run.source}: truncated: no '# Avg bus bandwidth' trailer after the last row"
            f" (size {last}); the sweep and the tool's average are incomplete"
        )
    if run.skipped_lines:
        n = run.skipped_lines
        what = "line that is" if n == 1 else "lines that are"
        notes.append(f"{run.source}: skipped {n} {what} not nccl-tests output")
    return notes


def size_text(n: float) -> str:
    """``268435456`` → ``256M`` (K/M/G when whole units), other sizes as plain numbers."""
    for unit, factor in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{int(n) // factor}{unit}"
    return str(int(n)) if n == int(n) else f"{n:g}"
