"""The lines of a saved ``all_reduce_perf`` log: launcher prefixes off, each line classified.

People save nccl-tests' output through a launcher and a batch script: ``srun --label`` puts
``N: `` (the task number, padded to the widest) before every line, OpenMPI's
``--tag-output`` puts ``[JOB,RANK]<stdout>:`` (or ``<stderr>:``); shell traces (``+ srun
...``), ssh warnings and ``NCCL INFO`` lines come in between. The prefix form is decided once
per file, from the lines that read as nccl-tests output once it is off, so a plain row is
never cut as if it were labelled. Pure.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass

INT_RE = re.compile(r"-?[0-9]{1,30}")  # bounded: int() refuses thousands of digits
_VERSION = re.compile(r"\bNCCL version (\S+)")
_DEBUG = re.compile(r"\bNCCL (INFO|WARN|TRACE|ABORT)\b")
PREFIXES = {
    "srun --label": re.compile(r"[ 0-9]*[0-9]: "),
    "mpirun --tag-output": re.compile(r"\[[^\]\s]*,[0-9]+\]<std(?:out|err)>:"),
}


class Kind(enum.Enum):
    """What a line is to the reader."""

    ROW = "row"  # starts with two integers (size, count): a table row, or a cut one
    COMMENT = "comment"  # nccl-tests' own '#' lines: header, devices, columns, trailer
    VERSION = "version"  # "NCCL version X", alone or inside an NCCL INFO line
    SKIPPED = "skipped"  # blank, NCCL_DEBUG output, shell traces, warnings: counted


@dataclass(frozen=True)
class Line:
    """One line of the input, its prefix off and its ends stripped."""

    number: int  # 1-based, as an editor counts
    text: str
    kind: Kind
    version: str | None = None  # the X of "NCCL version X"


def _is_row(text: str) -> bool:
    tokens = text.split(maxsplit=2)
    return len(tokens) >= 2 and all(INT_RE.fullmatch(t) for t in tokens[:2])


def _looks_like_output(text: str) -> bool:
    stripped = text.strip()
    return stripped.startswith(("#", "NCCL version")) or _is_row(stripped)


def prefix_form(lines: Sequence[str]) -> str | None:
    """The launcher prefix most of the file's nccl-tests lines carry (None: no prefix)."""
    best, most = None, sum(1 for line in lines if _looks_like_output(line))
    for name, pattern in PREFIXES.items():
        count = 0
        for line in lines:
            match = pattern.match(line)
            count += bool(match and _looks_like_output(line[match.end() :]))
        if count > most:
            best, most = name, count
    return best


def _kind(text: str) -> tuple[Kind, str | None]:
    version = _VERSION.search(text)
    if version:
        return Kind.VERSION, version.group(1)
    if text.startswith("#"):
        return Kind.COMMENT, None
    if _is_row(text) and not _DEBUG.search(text):
        return Kind.ROW, None
    return Kind.SKIPPED, None


def read_lines(text: str) -> tuple[tuple[Line, ...], str | None]:
    """The input's lines (the end of the last one is not a line) and its prefix form."""
    raw = text.split("\n")
    if raw and raw[-1] == "":
        raw.pop()
    form = prefix_form(raw)
    pattern = PREFIXES[form] if form else None
    lines = []
    for number, line in enumerate(raw, 1):
        match = pattern.match(line) if pattern else None
        stripped = (line[match.end() :] if match else line).strip()
        kind, version = _kind(stripped)
        lines.append(Line(number, stripped, kind, version))
    return tuple(lines), form
