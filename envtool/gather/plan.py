"""Which of the files found a node's folder takes, and under which name, within its bounds:
pure (the candidates as ``lstat`` saw them in, a Plan out); what it leaves out is listed with
the reason, never dropped in silence. Error files first (small, and they name the failure),
then the dumps, each in path order."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from envtool.gather.find import Candidate

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """A node's bounds (docs/commands/collect.md)."""

    file_bytes: int = 64 * MiB  # one file
    node_bytes: int = 256 * MiB  # everything a node's folder holds
    files: int = 1000  # files a node's folder holds (collect.json not counted)
    kernel_bytes: int = 16 * MiB  # kernel.log: its newest records are kept


@dataclass(frozen=True)
class Take:
    """A file to copy, and its path in the host's folder."""

    origin: str
    rel: str
    kind: str
    size: int  # as lstat saw it; the copy reads at most Limits.file_bytes


@dataclass(frozen=True)
class Plan:
    takes: tuple[Take, ...]
    left_out: tuple[tuple[str, str], ...]  # (from, why)


def _mib(n: int) -> str:
    return f"{n / MiB:.0f} MiB" if n >= MiB else f"{n:,} bytes"


def _rel(c: Candidate, errors: int) -> str:
    if c.kind == "error-json":
        return f"error/{errors}-error.json"
    return f"fr/{os.path.basename(c.origin)}"


def _why_not(c: Candidate, rel: str, taken: dict[str, str], used: tuple[int, int],
             limits: Limits) -> str | None:  # fmt: skip
    """Why ``c`` stays out, given the files and bytes ``used`` so far; None: it goes in."""
    files, size = used
    if c.refused is not None:
        return c.refused
    if c.size > limits.file_bytes:
        return f"{_mib(c.size)}: over the {_mib(limits.file_bytes)} bound of one file"
    if files >= limits.files:
        return f"over the {limits.files:,} files a node's folder holds"
    if size + c.size > limits.node_bytes:
        return f"{_mib(c.size)}: over the {_mib(limits.node_bytes)} a node's folder holds"
    if rel in taken:
        return f"the same name as {taken[rel]}, already taken as {rel}"
    return None


def plan(candidates: Sequence[Candidate], limits: Limits, used: tuple[int, int]) -> Plan:
    """The takes within ``limits``, ``used`` (files, bytes) being what the folder holds
    already (kernel.log, preflight.json)."""
    order = {"error-json": 0, "fr-dump": 1}
    files, size = used
    taken: dict[str, str] = {}
    takes: list[Take] = []
    left: list[tuple[str, str]] = []
    for c in sorted(candidates, key=lambda c: (order.get(c.kind, 2), c.origin)):
        errors = sum(1 for t in takes if t.kind == "error-json")
        rel = _rel(c, errors)
        why = _why_not(c, rel, taken, (files, size), limits)
        if why is not None:
            left.append((c.origin, why))
            continue
        taken[rel] = c.origin
        takes.append(Take(c.origin, rel, c.kind, c.size))
        files, size = files + 1, size + c.size
    return Plan(tuple(takes), tuple(left))
