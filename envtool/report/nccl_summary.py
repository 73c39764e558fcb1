"""The lines a reader of an nccl-tests log looks for, beside its layout: which collective it
measured (and, of a log of several, which run was read and which were skipped), the peak bus
bandwidth with the size where it was reached, and why a log's check failed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from envtool.nccl.model import ALL_REDUCE, NcclRow, NcclRun, Section, peak, wrong_rows, wrong_total
from envtool.report.nccl_text import size_text
from envtool.report.text import visible

SHOWN_SIZES = 6  # sizes named in the wrong-elements line; more are counted


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def peak_line(rows: Sequence[NcclRow], large: int) -> str:
    """``peak busbw 4.00 GB/s at 256M (sizes >= 256M: bandwidth-bound)``; a sweep that stops
    below ``large`` still gets its figure, with what it means said beside it."""
    found = peak(rows, large)
    if found is None:
        return "peak busbw: no rows"
    head = f"peak busbw {found.busbw:.2f} GB/s at {size_text(found.size)}"
    if found.bandwidth_bound:
        return f"{head} (sizes >= {size_text(large)}: bandwidth-bound)"
    last = size_text(max(r.size for r in rows))
    return f"{head} (the sweep stops at {last}, below {size_text(large)}: not bandwidth-bound)"


def peak_entry(rows: Sequence[NcclRow], large: int) -> dict[str, object] | None:
    """The peak as JSON: ``{"busbw", "size", "bandwidth_bound", "large_min_bytes"}``."""
    found = peak(rows, large)
    if found is None:
        return None
    return {**asdict(found), "large_min_bytes": large}


def _sizes(rows: Sequence[NcclRow]) -> str:
    shown = ", ".join(size_text(r.size) for r in rows[:SHOWN_SIZES])
    more = len(rows) - SHOWN_SIZES
    return shown + (f" and {more} more" if more > 0 else "")


def wrong_line(run: NcclRun) -> str | None:
    """Why a log's check failed, one line (its wrong elements, the rows and sizes that had
    them, its out-of-bounds values); None when it counted none."""
    bad, total, oob = wrong_rows(run.rows), wrong_total(run.rows) or 0, run.out_of_bounds or 0
    parts = []
    if total:
        what = "size" if len(bad) == 1 else "sizes"
        parts.append(
            f"{_plural(total, 'wrong element')} in {_plural(len(bad), 'row')} "
            f"({what} {_sizes(bad)})"
        )
    if oob:
        parts.append(f"{_plural(oob, 'out-of-bounds value')}")
    if not parts:
        return None
    what = "all-reduce" if run.collective == ALL_REDUCE else run.collective or "collective"
    return f"{run.source}: {' and '.join(parts)}: the {what} computed wrong results"


def collective_text(run: NcclRun) -> str:
    """``all_gather (all_gather_perf)``; ``all_reduce (by its rows; the log names none)``;
    ``gather or scatter (by its rows; ...)``: what the run measured and how that is known."""
    program = None if run.program is None else visible(run.program)
    if run.collective is not None and program is not None:
        return f"{run.collective} ({program})"
    fits = " or ".join(run.fits) or "unknown"
    if program is not None:  # a binary nccl-tests does not build
        return f"{run.collective or fits} (by its rows; the log names {program})"
    return f"{run.collective or fits} (by its rows; the log names none)"


def _section_text(s: Section) -> str:
    name = visible(s.program) if s.program else s.collective or " or ".join(s.fits) or "unknown"
    why = f": not read, {visible(s.error)}" if s.error else ""
    return f"{name} (lines {s.first_line}-{s.last_line}{why})"


def collective_lines(run: NcclRun) -> list[str]:
    """``collective: ...``; for a log of several runs, the lines of the one read and each run
    skipped, in order."""
    lines = [f"collective: {collective_text(run)}"]
    if run.lines is not None:
        first, last = run.lines
        lines[0] += f", lines {first}-{last} of a log of {len(run.skipped) + 1} runs"
        lines.append("skipped: " + ", ".join(_section_text(s) for s in run.skipped))
    return lines
