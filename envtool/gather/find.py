"""What a job left on this node to gather: its flight-recorder dumps (each file whose path
starts with a dump prefix: torch writes ``PREFIX<rank>``) and torchelastic's error files
(paths or glob patterns). Only ``lstat`` here, never a read: each file found is a Candidate
with the reason it cannot be taken, if one shows already (a symlink, not a regular file, not
the job's user's); the copy checks again on the file it opens (gather/copy.py)."""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

FR_VARIABLES = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
FR_DEFAULT = "/tmp/nccl_trace_rank_"  # torch's own default prefix
ERROR_VARIABLE = "TORCHELASTIC_ERROR_FILE"
MAX_FOUND = 10_000  # paths looked at per prefix or pattern; more are one left-out line


@dataclass(frozen=True)
class Candidate:
    """A file found, as ``lstat`` saw it."""

    origin: str
    kind: str  # "fr-dump" | "error-json"
    size: int
    mtime: float
    refused: str | None  # why it cannot be taken, when that shows without opening it


@dataclass(frozen=True)
class Found:
    """Every candidate, and the sources that matched more than MAX_FOUND paths."""

    candidates: tuple[Candidate, ...]
    overflow: tuple[tuple[str, str], ...]  # (source, why)


def fr_prefixes(given: tuple[str, ...], env: Mapping[str, str]) -> tuple[str, ...]:
    """``--fr`` when given, else the prefixes the job's variables name, else torch's."""
    if given:
        return tuple(dict.fromkeys(given))
    named = tuple(dict.fromkeys(env[v] for v in FR_VARIABLES if env.get(v)))
    return named or (FR_DEFAULT,)


def error_patterns(given: tuple[str, ...], env: Mapping[str, str]) -> tuple[str, ...]:
    """``--error-file`` when given, else TORCHELASTIC_ERROR_FILE (none: nothing looked for)."""
    if given:
        return tuple(dict.fromkeys(given))
    return (env[ERROR_VARIABLE],) if env.get(ERROR_VARIABLE) else ()


def refusal(st: os.stat_result, uid: int) -> str | None:
    """Why a file of this ``lstat``/``fstat`` cannot be gathered for user ``uid``, or None."""
    if stat.S_ISLNK(st.st_mode):
        return "a symlink (never followed)"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_uid != uid:  # a hard link to another user's file is theirs, not the job's
        return f"owned by uid {st.st_uid}, not the job's user (uid {uid})"
    return None


def _candidate(path: str, kind: str, uid: int) -> Candidate | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None  # gone since it was listed
    except OSError as exc:
        return Candidate(path, kind, 0, 0.0, f"cannot be read: {exc.strerror}")
    return Candidate(path, kind, st.st_size, st.st_mtime, refusal(st, uid))


def _prefixed(prefix: str) -> Iterator[str]:
    """Each path in the prefix's folder whose name starts with the prefix's last part."""
    folder, start = os.path.split(prefix)
    try:
        with os.scandir(folder or ".") as entries:
            for entry in entries:
                if entry.name.startswith(start) and start:
                    yield os.path.join(folder, entry.name)
    except OSError:  # no such folder, or not ours to list: nothing of the job's there
        return


def _matched(pattern: str) -> Iterator[str]:
    if glob.has_magic(pattern):
        yield from glob.iglob(pattern)
    elif os.path.lexists(pattern):
        yield pattern


def _gather(sources: tuple[str, ...], kind: str, uid: int, found: list[Candidate],
            overflow: list[tuple[str, str]]) -> None:  # fmt: skip
    for source in sources:
        paths = _prefixed(source) if kind == "fr-dump" else _matched(source)
        for n, path in enumerate(paths):
            if n >= MAX_FOUND:
                shown = f"{source}*" if kind == "fr-dump" else source
                overflow.append((shown, f"matched more than {MAX_FOUND:,} paths: the rest unread"))
                break
            candidate = _candidate(path, kind, uid)
            if candidate is not None:
                found.append(candidate)


def find(fr: tuple[str, ...], errors: tuple[str, ...], uid: int) -> Found:
    """The candidates of the dump prefixes ``fr`` and the error-file patterns ``errors``,
    each path once (the first kind that found it)."""
    found: list[Candidate] = []
    overflow: list[tuple[str, str]] = []
    _gather(errors, "error-json", uid, found, overflow)
    _gather(fr, "fr-dump", uid, found, overflow)
    seen: dict[str, Candidate] = {}
    for c in found:
        seen.setdefault(os.path.abspath(c.origin), c)
    return Found(tuple(seen.values()), tuple(overflow))
