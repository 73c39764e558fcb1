"""The row layouts of nccl-tests over the years, rebuilt from real logs as each era printed them.

The formats are NVIDIA/nccl-tests' own printf strings: before 2.13 (src/common.cu and
src/all_reduce.cu, 2019-2022), 2.13's ``-c 0``, and 2.19.2's ``-I 1`` (src/util.cu).
"""

# ruff: noqa: UP031  (the printf formats are nccl-tests' own, kept as it wrote them)

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import run_main

from envtool.cli import main
from envtool.nccl import model
from envtool.nccl.model import NcclRun
from envtool.nccl.parse import parse
from envtool.report.nccl_text import format_run

ISSUE290 = "issue290-8xh100-single-node-nvls.txt"
ORCD = "orcd-2node-16xb200-ndr-ib.txt"
DEVICE = re.compile(
    r"#  Rank\s+(\d+) Group\s+\d+ Pid\s+(\d+) on\s+(\S+) device\s+(\d+) \[(\S+)\] (.*)"
)
OLD_DEVICE = "#   Rank %2d Pid %6d on %10s device %2d [%s] %s"
OLD_COLUMNS = "# %10s  %12s  %8s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s"
OLD_PLACES = (
    "# %10s  %12s  %8s  %6s            out-of-place                       in-place          "
)
OLD_PLACE = "  %7s  %6s  %6s  %5s"  # "  %7s  %6.2f  %6.2f  %5.0le", the floats as the log had them
ITER_PLACES = (
    "# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)"
    "                                in-place (+ per-iteration)"
)
ITER_COLUMNS = "# %10s  %12s  %8s  %6s  %6s" + "  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s" * 2
ITER_NAMES = ("time", "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%")


def _text(shared_data: Path, name: str) -> str:
    return (shared_data / "real" / "nccl-tests" / name).read_text()


def _old_era(text: str, error: str = "0e+00") -> str:
    """A real log as nccl-tests < 2.13 printed the same run."""
    out = []
    for line in text.splitlines():
        f = line.split()
        if line.startswith("# nThread"):  # "... iters: %d validation: %d \n"
            out.append(re.sub(r" agg iters: \d+| graph: \d+", "", line) + " ")
        elif match := DEVICE.fullmatch(line):
            rank, pid, host, dev, bus, name = match.groups()
            out.append(OLD_DEVICE % (int(rank), int(pid), host, int(dev), bus, name))
        elif line.startswith("#       size"):
            names = ("time", "algbw", "busbw", "error") * 2
            out.append(OLD_COLUMNS % ("size", "count", "type", "redop", *names))
        elif line.startswith("#        (B)"):
            units = ("(us)", "(GB/s)", "(GB/s)", "") * 2
            out.append(OLD_COLUMNS % ("(B)", "(elements)", "", "", *units))
        elif line.startswith("#    ") and "out-of-place" in line:
            out.append(OLD_PLACES % ("", "", "", ""))
        elif not line.startswith("#") and len(f) == 13:  # no root; the error, not #wrong
            head = "%12s  %12s  %8s  %6s" % tuple(f[:4])
            out.append(head + OLD_PLACE % (*f[5:8], error) + OLD_PLACE % (*f[9:12], error))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def test_before_2_13_rows_devices_and_header(shared_data: Path) -> None:
    text = _text(shared_data, ISSUE290)
    now, old = parse(text), parse(_old_era(text), "old.txt")
    assert old.columns == 12 and not old.truncated and old.skipped_lines == 0
    assert [(r.size, r.count, r.type, r.redop, r.root) for r in old.rows] == [
        (r.size, r.count, r.type, r.redop, -1) for r in now.rows
    ]
    assert [(r.oop.busbw, r.ip.time_us) for r in old.rows] == [
        (r.oop.busbw, r.ip.time_us) for r in now.rows
    ]
    assert all(p.wrong is None and p.max_error == 0.0 for r in old.rows for p in (r.oop, r.ip))
    assert model.wrong_total(old.rows) is None  # no #wrong column to count from
    assert model.peak_busbw(old.rows) == 476.53 and old.avg_busbw == 439.369
    assert [d.group for d in old.devices] == [None] * 8
    assert [(d.rank, d.pid, d.host, d.bus) for d in old.devices] == [
        (d.rank, d.pid, d.host, d.bus) for d in now.devices
    ]
    assert old.param_map["validation"] == "1" and "graph" not in old.param_map
    shown = format_run(old)  # laid out again in its own era's layout
    # envtool ends neither the header with a blank nor, as GitHub did here, the average without
    assert shown == _old_era(text).replace(" \n#\n# Using", "\n#\n# Using").replace(
        "439.369\n", "439.369 \n"
    )
    assert parse(shown).rows == old.rows


def test_before_2_13_errors_and_no_check(shared_data: Path, tmp_path: Path) -> None:
    text = _text(shared_data, ISSUE290)
    unchecked = parse(_old_era(text, error="N/A"))
    assert all(p.max_error is None for r in unchecked.rows for p in (r.oop, r.ip))
    failed = _old_era(text, error="2e-03").replace("values : 0 OK", "values : 12 FAILED")
    log = tmp_path / "old.txt"
    log.write_text(failed)
    run = parse(failed)
    assert run.rows[0].ip.max_error == 0.002 and run.out_of_bounds == 12
    code, _, _ = run_main(main, tmp_path, [], ("nccl-tests", str(log)))
    assert code == 1  # the log's own verdict: out-of-bounds values


def _render13(fields: list[str]) -> str:
    place = "  %7s  %6s  %6s  %5s"
    return (
        "%12s  %12s  %8s  %6s  %6s" % tuple(fields[:5])
        + place % tuple(fields[5:9])
        + (place % tuple(fields[9:13]))
    )


def test_2_13_without_validation(shared_data: Path, tmp_path: Path) -> None:
    text = _text(shared_data, ORCD)
    lines = []
    for line in text.splitlines():
        f = line.split()
        if not line.startswith("#") and len(f) == 13:
            assert _render13(f) == line  # the real layout, re-rendered from its fields
            f[8] = f[12] = "N/A"  # -c 0: PRINT("  %7s  %6.2f  %6.2f  %5s", ..., "N/A")
            line = _render13(f)
        lines.append(line)
    run = parse("\n".join(lines) + "\n")
    assert all(p.wrong is None for r in run.rows for p in (r.oop, r.ip))
    assert model.wrong_total(run.rows) is None and model.peak_busbw(run.rows) == 239.87
    assert parse(format_run(run)).rows == run.rows


def _float_str(value: float, width: int) -> str:
    """src/util.cu getFloatStr (2.19 era): fewer decimals as the integer part grows."""
    power, val = 0, 1
    while value >= val:
        power, val = power + 1, val * 10
    if power < width - 2:
        return "%*.2f" % (width, value)
    if power < width - 1:
        return "%*.1f" % (width, value)
    return "%*.0f" % (width, value) if power < width + 1 else "%*.1e" % (width, value)


def _per_iter_era(text: str) -> tuple[str, list[tuple[float, ...]]]:
    """The orcd run as nccl-tests 2.19.2 prints it with -I 1, and the i_* columns it got."""
    head = [
        "# nccl-tests version 2.19.2 nccl-headers=22902 nccl-library=22902",
        "# Collective test starting: all_reduce_perf",
    ]
    iters: list[tuple[float, ...]] = []
    out = []
    for line in text.splitlines():
        f = line.split()
        if line.startswith("# nThread"):
            out += [*head, line + " unalign: 0"]
            out.append("# Per-Iteration Report: CUDA event timing; i_* uses max over process rows")
        elif line.startswith("#    ") and "out-of-place" in line:
            out.append(ITER_PLACES % (("",) * 5))
        elif line.startswith("#       size"):
            out.append(ITER_COLUMNS % ("size", "count", "type", "redop", "root", *ITER_NAMES * 2))
        elif not line.startswith("#") and len(f) == 13:
            row = "%12s  %12s  %8s  %6s  %6s" % tuple(f[:5])
            for t, alg, bus in ((f[5], f[6], f[7]), (f[9], f[10], f[11])):
                us = float(t)
                stats = (us * 0.97, us * 1.08, us * 1.05, 2.5)
                cells = [_float_str(v, 7) for v in stats]
                iters.append(tuple(float(c) for c in cells))
                row += "  %7s  %6s  %6s  %6g" % (_float_str(us, 7), alg, bus, 0)
                row += "".join(f"  {c}" for c in cells)
            out.append(row)
        else:
            out.append(line)
    return "\n".join([*out, "# Collective test concluded: all_reduce_perf"]) + "\n", iters


def test_2_19_per_iteration_columns(shared_data: Path) -> None:
    text = _text(shared_data, ORCD)
    saved, iters = _per_iter_era(text)
    run, now = parse(saved, "per-iter.txt"), parse(text)
    assert run.columns == 21 and not run.truncated and run.skipped_lines == 0
    assert [(r.oop.busbw, r.ip.busbw) for r in run.rows] == [
        (r.oop.busbw, r.ip.busbw) for r in now.rows
    ]
    got = [(p.per_iter.min_us, p.per_iter.max_us, p.per_iter.p99_us, p.per_iter.cv_pct)
           for r in run.rows for p in (r.oop, r.ip) if p.per_iter]  # fmt: skip
    assert got == iters and len(got) == 16
    assert run.param_map["unalign"] == "0" and run.nccl_version == "2.29.2+cuda13.1"
    assert model.peak_busbw(run.rows) == 239.87 and run.avg_busbw == 109.041
    again = parse(format_run(run))
    assert again.rows == run.rows and again.columns == 21


def _retyped(text: str, kind: str, width: int, redop: str, root: int) -> str:
    """The same sweep as ``-d kind -o redop -r root`` would list it."""
    out = []
    for line in text.splitlines():
        f = line.split()
        if not line.startswith("#") and len(f) == 13:
            f[1], f[2], f[3], f[4] = str(int(f[0]) // width), kind, redop, str(root)
            line = _render13(f)
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize(
    ("kind", "width", "redop", "root"),
    [("half", 2, "max", -1), ("bfloat16", 2, "avg", 0), ("int8", 1, "prod", 3)],
)
def test_other_types_redops_and_roots(
    shared_data: Path, kind: str, width: int, redop: str, root: int
) -> None:
    text = _text(shared_data, ORCD)
    run = parse(_retyped(text, kind, width, redop, root))
    assert {(r.type, r.redop, r.root) for r in run.rows} == {(kind, redop, root)}
    assert all(r.count * width == r.size for r in run.rows)
    assert model.peak_busbw(run.rows) == 239.87
    assert format_run(run) == _retyped(text, kind, width, redop, root)


def test_one_table_of_several_types(shared_data: Path) -> None:
    text = _text(shared_data, ORCD)  # -d all: the sweeps follow each other in one table
    rows = [ln for ln in text.splitlines(keepends=True) if ln.startswith(" ")]
    half = [ln for ln in _retyped(text, "half", 2, "sum", -1).splitlines(True) if ln[0] == " "]
    both = text.replace(rows[-1], rows[-1] + "".join(half))
    run: NcclRun = parse(both)
    assert [r.type for r in run.rows] == ["float"] * 8 + ["half"] * 8
    assert not run.truncated and run.avg_busbw == 109.041
