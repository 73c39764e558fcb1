"""What the paths given to ``envtool explain`` hold: the files of a folder (walked in name
order, bounded, links not followed), each with the host its folder is of (an ``envtool
collect`` folder ``JOB/HOST/``: the command reads its ``collect.json``), and a torchelastic
``error.json`` as the lines of its message and its Python stack. Pure but for reading the
folder's names."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envtool.errors import InputError
from envtool.joblog.stream import LINE_CAP, RawLine

MAX_FILES = 10_000  # files read from the folders given
MAX_DEPTH = 8
MAX_JSON = 64 << 20  # bytes of an error.json or a verify report read
COLLECT = "collect.json"  # envtool collect's record of a node's folder
SKIPPED_NAMES = frozenset({COLLECT})


@dataclass(frozen=True)
class LogFile:
    """One file to read, and the host its folder says wrote it (None: its lines say)."""

    path: str
    host: str | None = None


def walk(root: Path, host_of: Callable[[Path], str | None]) -> list[LogFile]:
    """Every regular file under ``root`` in name order (symbolic links and what is not a
    regular file skipped), each with the host ``host_of`` says its folder is of (a collect
    folder's, read by the command with collect/1's strict reader); InputError past MAX_FILES
    or MAX_DEPTH."""
    out: list[LogFile] = []

    def visit(folder: Path, host: str | None, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise InputError(f"{folder}: folders deeper than {MAX_DEPTH} levels")
        host = host_of(folder) or host
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise InputError(f"{folder}: cannot list the folder: {exc.strerror}") from None
        for entry in entries:
            if entry.is_symlink() or entry.name in SKIPPED_NAMES:
                continue
            if entry.is_dir(follow_symlinks=False):
                visit(Path(entry.path), host, depth + 1)
            elif entry.is_file(follow_symlinks=False):
                if len(out) >= MAX_FILES:
                    raise InputError(f"{root}: more than {MAX_FILES} files")
                out.append(LogFile(entry.path, host))

    visit(root, None, 0)
    return out


def is_json(head: bytes) -> bool:
    """Whether a file begins as a JSON object does."""
    return head.lstrip()[:1] == b"{"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def elastic_lines(data: Any) -> Iterator[RawLine] | None:
    """The lines of a torchelastic ``error.json`` (``{"message": {"message": ..., "extraInfo":
    {"py_callstack": ..., "timestamp": ...}}}``, or ``"message"`` a string); None: not one."""
    if not isinstance(data, dict) or "message" not in data:
        return None
    message = data["message"]
    parts = [_text(message)]
    if isinstance(message, dict):
        extra = message.get("extraInfo")
        stack = _text(extra.get("py_callstack")) if isinstance(extra, dict) else ""
        parts = [_text(message.get("message")), stack]
    text = "\n".join(p for p in parts if p)
    return (
        RawLine(n, line[:LINE_CAP], len(line.encode("utf-8", "replace")), "\0" in line)
        for n, line in enumerate(text.split("\n"), 1)
        if line
    )
