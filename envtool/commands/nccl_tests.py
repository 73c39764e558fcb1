"""``envtool nccl-tests FILE``: an nccl-tests log read (all_reduce_perf or another collective,
named; of a log of several runs, the all_reduce one, the others listed), its peak busbw at
large sizes."""

from __future__ import annotations

from pathlib import Path

from envtool import yamlio
from envtool.errors import EXIT_OK, EXIT_PROBLEMS, InputError
from envtool.nccl.model import NcclRun
from envtool.nccl.parse import parse, parse_size
from envtool.protocol import schemas
from envtool.protocol.documents import Unreadable, document, read_allreduce
from envtool.protocol.fields import Malformed
from envtool.report import console, results
from envtool.report.nccl_summary import wrong_line
from envtool.report.nccl_text import reading_notes, run_of


def read_run(file: Path) -> NcclRun:
    """An nccl-tests log, or envtool's all-reduce JSON document, as an nccl-tests run."""
    text = yamlio.read_text(file, "nccl-tests log")
    if not text.lstrip().startswith("{"):
        return parse(text, str(file))
    try:
        doc = read_allreduce(document(text, str(file), schemas.ALLREDUCE))
    except Unreadable as exc:
        raise InputError(str(exc)) from None
    except Malformed as exc:
        raise InputError(f"{file}: {exc}") from None
    if doc.error:
        raise InputError(f"{file}: the all-reduce failed: {doc.error}")
    return run_of(doc, str(file))


def run(file: Path, fmt: str, large: str, plot: Path | None) -> int:
    """1 when the log counted wrong elements (#wrong or out-of-bounds values above 0), said in
    one line on stderr, as are a truncated log and skipped lines."""
    run_ = read_run(file)
    min_bytes = parse_size(large)
    results.nccl_result(run_, min_bytes, fmt)  # JSON with truncated and skipped_lines
    for note in reading_notes(run_):
        console.notice(note)
    if plot is not None:
        from envtool.report.plot import busbw_png

        busbw_png(run_, plot, min_bytes)
        console.wrote(plot)
    wrong = wrong_line(run_)
    if wrong is not None:  # the exit code says it failed; this line says why
        console.notice(f"envtool nccl-tests: {wrong}")
    return EXIT_OK if wrong is None else EXIT_PROBLEMS
