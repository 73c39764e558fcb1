"""``envtool explain PATH...``: what killed a job, from its own logs. Each log is read once,
line by line with a bound (joblog/stream.py), its lines attributed and classified
(joblog/scan.py), a flight-recorder dump read as plain data (joblog/frdump.py: where each
rank stood), a torchelastic ``error.json`` as its message's lines, a folder (an
``envtool collect`` folder too: joblog/files.py) file by file; judge/explain.py finds the
initiating event, judge/explain_join.py joins it with the nodes' verify reports (``--report``,
or those a collect folder holds); report/explain_text.py says it.
Exit 0 no failure, 1 a cause named, 4 a failure with no established cause, 2 bad input."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from envtool.errors import InputError
from envtool.joblog import files, frdump, stream
from envtool.joblog.scan import FileScan, scan
from envtool.judge import explain, explain_join
from envtool.protocol import collect_record, schemas, verify_report
from envtool.protocol.verify_report import VerifyDocument
from envtool.report import explain_text
from envtool.yamlio import STDIN

if TYPE_CHECKING:
    from envtool.commands.verify import VerifyArgs


@dataclass
class _Read:
    scans: list[FileScan] = field(default_factory=list)
    dumps: list[frdump.Position] = field(default_factory=list)
    reports: list[tuple[str, VerifyDocument]] = field(default_factory=list)


def _json(name: str, data: bytes, host: str | None, into: _Read) -> bool:
    """A JSON file: a verify report (joined), a torchelastic error.json (its lines); False:
    neither (read as a log)."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return False
    if isinstance(doc, dict) and doc.get("schema") == schemas.VERIFY:
        into.reports.append((name, verify_report.loads(data.decode("utf-8", "replace"), name)))
        return True
    lines = files.elastic_lines(doc)
    if lines is None:
        return False
    into.scans.append(scan(name, lines, host))
    return True


def _scan_stream(name: str, fh: BinaryIO, into: _Read, host: str | None = None) -> None:
    head = fh.read(stream.SNIFF)
    if frdump.is_dump(head):  # a flight-recorder dump: read as plain data, never unpickled
        data = head + fh.read(frdump.MAX_DUMP + 1 - len(head))
        into.dumps.append(frdump.position(name, frdump.load(name, data)))
        return
    if files.is_json(head):
        data = head + fh.read(files.MAX_JSON + 1 - len(head))
        if len(data) <= files.MAX_JSON and _json(name, data, host, into):
            return
        head = data  # a log after all: what was read of it, then the rest
    at = stream.binary_at(head[: stream.SNIFF])
    if at is not None:
        raise InputError(f"{name}: not a text log (binary data from byte {at})")
    into.scans.append(scan(name, stream.lines(fh, head), host))


def _read_file(log: files.LogFile, into: _Read) -> None:
    try:
        with Path(log.path).open("rb") as fh:
            _scan_stream(log.path, fh, into, log.host)
    except FileNotFoundError:
        raise InputError(f"{log.path}: log not found") from None
    except OSError as exc:
        raise InputError(f"{log.path}: cannot read the log: {exc.strerror}") from None


def _collected_host(folder: Path) -> str | None:
    """The node an ``envtool collect`` folder is of: its collect.json (collect/1, read
    strictly) names it and the folder's name agrees; None: not a collect folder, or one that
    does not say so plainly (its files then speak for no host)."""
    record = folder / files.COLLECT
    try:
        if record.is_symlink() or not record.is_file() or record.stat().st_size > files.MAX_JSON:
            return None
        said = collect_record.loads(record.read_text("utf-8", "replace"), str(record))
    except (OSError, InputError):
        return None
    return said.host if said.host == folder.name else None


def read_paths(paths: tuple[str, ...], reports: tuple[Path, ...] = ()) -> _Read:
    """Every path (``-``: standard input; a folder: its files), and the reports given."""
    into = _Read()
    for path in paths:
        if path == STDIN:
            _scan_stream("<stdin>", sys.stdin.buffer, into)
            continue
        folder = Path(path)
        try:
            is_dir = folder.is_dir()
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror}") from None
        logs = files.walk(folder, _collected_host) if is_dir else [files.LogFile(path)]
        if not logs:
            raise InputError(f"{path}: a folder with no files in it")
        for log in logs:
            _read_file(log, into)
    into.reports += [(str(p), verify_report.read(p)) for p in reports]
    return into


def run(
    paths: tuple[str, ...],
    fmt: str,
    reports: tuple[Path, ...] = (),
    verify: VerifyArgs | None = None,
) -> int:
    """0 the logs show no failure, 1 a cause named, 4 a failure with no established cause;
    ``verify``: a verify run now (``--hosts``), its report joined as a saved one is."""
    read = read_paths(paths, reports)  # bad input stops here, before any report
    if verify is not None:
        from envtool.commands import verify as verify_command
        from envtool.report.verify import document

        said = f"verify --hosts {Path(verify.hosts_spec or '').name}"
        read.reports.append((said,
                             document(verify_command.decide(verify))))  # fmt: skip
    scans = read.scans + frdump.scans(read.dumps)
    verdict = explain.decide(scans)
    named = sorted({h for s in scans for h in s.hosts})
    verdict, joined = explain_join.join(verdict, read.reports, named)
    explain_text.show(explain_text.document(verdict, scans, joined), scans, fmt)
    return verdict.exit_code
