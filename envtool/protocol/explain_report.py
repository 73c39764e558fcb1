"""``envtool.explain/1``: what ``envtool explain --format json`` prints, its writer and its
strict reader (unknown fields refused, each value's type checked), so a saved report reads
back into the same document."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from envtool.errors import InputError
from envtool.protocol import schemas
from envtool.protocol.strict import Bad, obj, typed
from envtool.protocol.verify_report import FindingEntry

STATUSES = ("no-failure", "cause", "not-established", "differs")


@dataclass(frozen=True)
class EvidenceEntry:
    """One line of a log as evidence (made visible, bounded)."""

    file: str
    line: int
    text: str
    where: str  # who wrote it, as its prefixes and NCCL header say, or "not attributed"


@dataclass(frozen=True)
class ExplainFinding:
    """A finding worded, where it happened, what would settle it, and its evidence."""

    finding: FindingEntry
    where: str
    needs: tuple[str, ...]  # cause-not-established: the evidence that would settle it
    evidence: tuple[EvidenceEntry, ...]
    lines: int  # lines of its kind in the logs (the evidence lists the first)


@dataclass(frozen=True)
class JoinedEntry:
    """A verify report's finding beside the logs' verdict (judge/explain_join.py)."""

    role: str  # cause, confirms, beside
    report: str
    finding: FindingEntry
    unattributed: bool  # the logs name no host: the report's host, not the logs'


ROLES = ("cause", "confirms", "beside")


@dataclass(frozen=True)
class FileEntry:
    """One log as read."""

    path: str
    lines: int
    attributed: int
    odd: int  # lines with NUL bytes or bytes that are not UTF-8
    cut: int  # lines longer than line_cap (their first line_cap bytes read)


@dataclass(frozen=True)
class ExplainDocument:
    """The whole report."""

    status: str
    verdict: str
    files: tuple[FileEntry, ...]
    findings: tuple[ExplainFinding, ...]
    cascade: tuple[tuple[str, int], ...]  # the other failure lines, by sign
    silent: tuple[int, ...]  # ranks named that reported no watchdog timeout
    line_cap: int
    joined: tuple[JoinedEntry, ...] = ()  # --report: the nodes' verify findings


def dumps(doc: ExplainDocument) -> str:
    """The report's JSON text (keys sorted, two-space indent, a final newline)."""
    body = asdict(doc)
    body["cascade"] = [{"sign": s, "lines": n} for s, n in doc.cascade]
    return json.dumps({"schema": schemas.EXPLAIN, **body}, indent=2, sort_keys=True) + "\n"


def _list(value: Any, what: str) -> list[Any]:
    return list(typed(value, list, what))


def _finding_entry(value: Any) -> FindingEntry:
    d = obj(value, FindingEntry)
    text = {
        k: typed(d[k], str, k)
        for k in ("kind", "severity", "subject", "expected", "actual", "hint")
    }
    hosts = tuple(typed(h, str, "hosts") for h in _list(d["hosts"], "hosts"))
    return FindingEntry(**text, hosts=hosts, follows=typed(d["follows"], int, "follows"))


def _evidence(value: Any) -> EvidenceEntry:
    d = obj(value, EvidenceEntry)
    return EvidenceEntry(
        typed(d["file"], str, "file"),
        typed(d["line"], int, "line"),
        typed(d["text"], str, "text"),
        typed(d["where"], str, "where"),
    )


def _explain_finding(value: Any) -> ExplainFinding:
    d = obj(value, ExplainFinding)
    return ExplainFinding(
        _finding_entry(d["finding"]),
        typed(d["where"], str, "where"),
        tuple(typed(n, str, "needs") for n in _list(d["needs"], "needs")),
        tuple(_evidence(e) for e in _list(d["evidence"], "evidence")),
        typed(d["lines"], int, "lines"),
    )


def _file(value: Any) -> FileEntry:
    d = obj(value, FileEntry)
    counts = {k: typed(d[k], int, k) for k in ("lines", "attributed", "odd", "cut")}
    return FileEntry(typed(d["path"], str, "path"), **counts)


def _joined(value: Any) -> JoinedEntry:
    d = obj(value, JoinedEntry)
    role = typed(d["role"], str, "role")
    if role not in ROLES:
        raise Bad(f"'role' must be one of {', '.join(ROLES)}")
    return JoinedEntry(role, typed(d["report"], str, "report"), _finding_entry(d["finding"]),
                       typed(d["unattributed"], bool, "unattributed"))  # fmt: skip


def _cascade(value: Any) -> tuple[str, int]:
    if not isinstance(value, dict) or set(value) != {"sign", "lines"}:
        raise Bad("a cascade entry must be {sign, lines}")
    return typed(value["sign"], str, "sign"), typed(value["lines"], int, "lines")


def loads(text: str, source: str) -> ExplainDocument:
    """Read a report back; InputError naming ``source`` when it is not an explain/1 report."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        raise InputError(f"{source}: not an envtool explain JSON report") from None
    if not isinstance(doc, dict) or doc.get("schema") != schemas.EXPLAIN:
        raise InputError(f"{source}: not an envtool explain JSON report ({schemas.EXPLAIN})")
    try:
        d = obj(doc, ExplainDocument, frozenset({"schema"}))
        status = typed(d["status"], str, "status")
        if status not in STATUSES:
            raise Bad(f"'status' must be one of {', '.join(STATUSES)}")
        return ExplainDocument(
            status,
            typed(d["verdict"], str, "verdict"),
            tuple(_file(f) for f in _list(d["files"], "files")),
            tuple(_explain_finding(f) for f in _list(d["findings"], "findings")),
            tuple(_cascade(c) for c in _list(d["cascade"], "cascade")),
            tuple(typed(r, int, "silent") for r in _list(d["silent"], "silent")),
            typed(d["line_cap"], int, "line_cap"),
            tuple(_joined(j) for j in _list(d["joined"], "joined")),
        )
    except Bad as exc:
        raise InputError(f"{source}: not an envtool explain JSON report: {exc}") from None
