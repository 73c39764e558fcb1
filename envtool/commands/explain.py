"""``envtool explain PATH...``: what killed a job, from its own logs. Each log is read once,
line by line with a bound (joblog/stream.py), its lines attributed and classified
(joblog/scan.py), a flight-recorder dump read as plain data (joblog/frdump.py: where each
rank stood); judge/explain.py finds the initiating event; report/explain_text.py says it.
Exit 0 no failure, 1 a cause named, 4 a failure with no established cause, 2 bad input."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import BinaryIO

from envtool.errors import InputError
from envtool.joblog import frdump, stream
from envtool.joblog.scan import FileScan, scan
from envtool.judge import explain
from envtool.report import explain_text
from envtool.yamlio import STDIN


def _scan_stream(name: str, fh: BinaryIO) -> FileScan | frdump.Position:
    head = fh.read(stream.SNIFF)
    if frdump.is_dump(head):  # a flight-recorder dump: read as plain data, never unpickled
        data = head + fh.read(frdump.MAX_DUMP + 1 - len(head))
        return frdump.position(name, frdump.load(name, data))
    at = stream.binary_at(head)
    if at is not None:
        raise InputError(f"{name}: not a text log (binary data from byte {at})")
    return scan(name, stream.lines(fh, head))


def read_log(path: str) -> FileScan | frdump.Position:
    """One log (``-``: standard input) or flight-recorder dump, read once; InputError naming
    it when unreadable."""
    if path == STDIN:
        return _scan_stream("<stdin>", sys.stdin.buffer)
    file = Path(path)
    try:
        if file.is_dir():
            raise InputError(f"{path}: a folder: give its log files (folders: not yet)")
        with file.open("rb") as fh:
            return _scan_stream(path, fh)
    except FileNotFoundError:
        raise InputError(f"{path}: log not found") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the log: {exc.strerror}") from None


def run(paths: tuple[str, ...], fmt: str) -> int:
    """0 the logs show no failure, 1 a cause named, 4 a failure with no established cause."""
    read = [read_log(p) for p in paths]  # bad input stops here, before any report
    dumps = [r for r in read if isinstance(r, frdump.Position)]
    scans = [r for r in read if isinstance(r, FileScan)] + frdump.scans(dumps)
    verdict = explain.decide(scans)
    explain_text.show(explain_text.document(verdict, scans), scans, fmt)
    return verdict.exit_code
