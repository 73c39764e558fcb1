"""Laying out rows in nccl-tests' ``all_reduce_perf`` text format (the inverse of nccl/parse.py).

The one text layout of all-reduce results: real logs read back (``format_run``) and
envtool's own probe (``format_allreduce``). Pure: ``parse(format_run(run))`` gives ``run``
back (tested on the real logs).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from envtool.nccl.model import NcclDevice, NcclResult, NcclRow, NcclRun, nccl_avg_busbw
from envtool.nccl.parse import INT_RE, NO_COLON, PARAM_KEYS
from envtool.protocol.types import AllReduceResult
from envtool.report.text import visible

_COLUMNS = (
    "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "  # noqa: UP031
    % ("", "", "", "", ""),
    "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s"  # noqa: UP031
    % ("size", "count", "type", "redop", "root", *("time", "algbw", "busbw", "#wrong") * 2),
    "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s"  # noqa: UP031
    % ("(B)", "(elements)", "", "", "", *("(us)", "(GB/s)", "(GB/s)", "") * 2),
)


def _time(us: float) -> str:
    if us >= 10000.0:
        return f"{us:7.0f}"
    return f"{us:7.1f}" if us >= 100.0 else f"{us:7.2f}"


def _token(name: str, value: str) -> str:
    if not value or value.split() != [value]:
        raise ValueError(f"{name} must be one non-empty word, got {value!r}")
    return value


def _format_result(r: NcclResult) -> str:
    if not all(math.isfinite(v) and v >= 0 for v in (r.time_us, r.algbw, r.busbw)):
        raise ValueError(f"times and bandwidths must be finite and non-negative: {r}")
    # nccl-tests prints #wrong with %5g (1e+06 from a million on); %d keeps the count exact
    wrong = "N/A" if r.wrong is None else str(r.wrong)
    return f"  {_time(r.time_us):>7}  {r.algbw:6.2f}  {r.busbw:6.2f}  {wrong:>5}"


def format_row(row: NcclRow) -> str:
    """One row in all_reduce_perf's layout (no newline)."""
    kind, redop = _token("type", row.type), _token("redop", row.redop)
    head = f"{row.size:12d}  {row.count:12d}  {kind:>8}  {redop:>6}  {row.root:6d}"
    return head + _format_result(row.oop) + _format_result(row.ip)


def _defaults(rows: Sequence[NcclRow]) -> dict[str, str]:
    sizes = [r.size for r in rows] or [0]
    factor = sizes[1] // sizes[0] if len(sizes) > 1 and sizes[0] else 2
    return {
        "nThread": "1", "nGpus": "1", "minBytes": str(min(sizes)), "maxBytes": str(max(sizes)),
        "step": f"{factor}(factor)", "warmup iters": "5", "iters": "20", "agg iters": "1",
        "validation": "1", "graph": "0",
    }  # fmt: skip


def _param_line(rows: Sequence[NcclRow], header: Mapping[str, object]) -> str:
    values = {**_defaults(rows), **{k: str(v) for k, v in header.items()}}
    for key, value in values.items():
        if not re.fullmatch(r"[A-Za-z][A-Za-z ]*", key) or not INT_RE.match(value) or " " in value:
            raise ValueError(f"bad all_reduce_perf parameter {key!r}: {value!r}")
    keys = [*PARAM_KEYS, *(k for k in header if k not in PARAM_KEYS)]
    parts = (f"{k} {values[k]}" if k in NO_COLON else f"{k}: {values[k]}" for k in keys)
    return "# " + " ".join(parts)


def _device_line(d: NcclDevice) -> str:
    return (
        f"#  Rank {d.rank:2d} Group {d.group:2d} Pid {d.pid:6d} on {_token('host', d.host):>10}"
        f" device {d.device:2d} [{visible(d.bus)}] {visible(d.name)}"
    )


def _footer(
    rows: Sequence[NcclRow], avg_busbw: float | None, oob: int | None, error: str
) -> list[str]:
    if oob is None:  # nccl-tests counts the checks that found wrong elements
        oob = sum(1 for r in rows for p in (r.oop, r.ip) if p.wrong)
    avg = nccl_avg_busbw(rows) if avg_busbw is None else avg_busbw
    return [
        *([f"# error: {error}"] if error else []),
        f"# {'Out of bounds values':<20} : {oob} {'FAILED' if oob else 'OK'}",
        f"# {'Avg bus bandwidth':<20} : {avg:g} ",  # "%g %s" with no threshold check: a blank
        "#",
    ]


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
    """A whole all_reduce_perf report: header (``# nThread`` keys), devices, rows, footer."""
    lines = [_param_line(rows, header), "#", "# Using devices"]
    lines += [_device_line(d) for d in devices]
    lines += [f"NCCL version {nccl_version}"] if nccl_version else []
    lines += ["#", *_COLUMNS, *(format_row(r) for r in rows)]
    return "\n".join([*lines, *_footer(rows, avg_busbw, out_of_bounds, error)]) + "\n"


def format_run(run: NcclRun, error: str = "") -> str:
    """A run laid out (again) in all_reduce_perf's layout; ``error`` before the footer."""
    return format_rows(
        run.rows,
        run.param_map,
        devices=run.devices,
        nccl_version=run.nccl_version,
        avg_busbw=run.avg_busbw,
        out_of_bounds=run.out_of_bounds,
        error=error,
    )


def run_of(ar: AllReduceResult, source: str) -> NcclRun:
    """envtool's all-reduce result as an nccl-tests run (for its text and its plot)."""
    p = dict(ar.params)
    header = {
        "minBytes": p.get("minbytes", 0),
        "maxBytes": p.get("maxbytes", 0),
        "step": f"{p.get('stepfactor', 2)}(factor)",
        "warmup iters": p.get("warmup_iters", 0),
        "iters": p.get("iters", 0),
    }
    params = tuple((k, str(v)) for k, v in header.items())
    nranks = len({d.rank for d in ar.devices}) or None
    return NcclRun(source, ar.rows, params, ar.devices, nranks, None, ar.avg_busbw, ar.wrong_total)


def format_allreduce(ar: AllReduceResult) -> str:
    """envtool's all-reduce in all_reduce_perf's layout, its error (if any) before the footer."""
    return format_run(run_of(ar, "envtool probe"), ar.error)


def size_text(n: float) -> str:
    """``268435456`` → ``256M`` (K/M/G when whole units), other sizes as plain numbers."""
    for unit, factor in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{int(n) // factor}{unit}"
    return str(int(n)) if n == int(n) else f"{n:g}"
