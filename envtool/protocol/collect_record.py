"""``envtool.collect/1``: the ``collect.json`` that ``envtool collect`` writes in each node's
folder (``DEST/JOBID/HOST/``), its writer and its strict reader (unknown or missing fields
refused, each value's type checked): the contract ``envtool explain`` reads a job's folder by
(docs/commands/collect.md)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from envtool.errors import InputError
from envtool.protocol import schemas
from envtool.protocol.strict import Bad, obj, typed

KINDS = ("fr-dump", "error-json", "kernel-log", "preflight", "log")
SINCE_FROM = ("--since", "SLURM_JOB_START_TIME", "scontrol", "files", "none")


@dataclass(frozen=True)
class CollectedFile:
    """One file of the node's folder: where it is (relative), where it came from, its size
    and sha256, what it is."""

    path: str
    origin: str  # "from" in the JSON
    bytes: int
    sha256: str
    kind: str


@dataclass(frozen=True)
class LeftOut:
    """A file (or a source) not gathered, and why: over a bound, a symlink, not the user's."""

    origin: str  # "from" in the JSON
    why: str


@dataclass(frozen=True)
class CollectRecord:
    """What one node gathered for one job."""

    host: str
    job_id: str
    user: str
    since: float | None  # epoch seconds; None: no start known (the whole kernel log, bounded)
    since_from: str  # which of SINCE_FROM gave ``since``
    collected_at: float
    files: tuple[CollectedFile, ...]
    left_out: tuple[LeftOut, ...]
    errors: tuple[str, ...]


def _renamed(entry: dict[str, Any]) -> dict[str, Any]:
    return {("from" if k == "origin" else k): v for k, v in entry.items()}


def dumps(record: CollectRecord) -> str:
    """The record's JSON text (keys sorted, two-space indent, a final newline)."""
    body = asdict(record)
    body["files"] = [_renamed(f) for f in body["files"]]
    body["left_out"] = [_renamed(e) for e in body["left_out"]]
    return json.dumps({"schema": schemas.COLLECT, **body}, indent=2, sort_keys=True) + "\n"


_NAMES = {"origin": "from"}  # a field's JSON name where it differs


def _file(value: Any) -> CollectedFile:
    d = obj(value, CollectedFile, names=_NAMES)
    kind = typed(d["kind"], str, "kind")
    if kind not in KINDS:
        raise Bad(f"unknown kind {kind!r}")
    path = typed(d["path"], str, "path")
    if path.startswith("/") or ".." in path.split("/") or "\0" in path:
        raise Bad(f"path {path!r} is not inside the host's folder")
    return CollectedFile(path, typed(d["from"], str, "from"), typed(d["bytes"], int, "bytes"),
                         typed(d["sha256"], str, "sha256"), kind)  # fmt: skip


def _left_out(value: Any) -> LeftOut:
    d = obj(value, LeftOut, names=_NAMES)
    return LeftOut(typed(d["from"], str, "from"), typed(d["why"], str, "why"))


def _record(doc: Any) -> CollectRecord:
    d = obj(doc, CollectRecord, frozenset({"schema"}), names=_NAMES)
    if d["schema"] != schemas.COLLECT:
        raise Bad(f"schema {d['schema']!r} is not {schemas.COLLECT}")
    since = None if d["since"] is None else float(typed(d["since"], (int, float), "since"))
    if d["since_from"] not in SINCE_FROM:
        raise Bad(f"since_from {d['since_from']!r} is not one of {', '.join(SINCE_FROM)}")
    for key in ("files", "left_out", "errors"):
        typed(d[key], list, key)
    return CollectRecord(
        typed(d["host"], str, "host"), typed(d["job_id"], str, "job_id"),
        typed(d["user"], str, "user"), since, d["since_from"],
        float(typed(d["collected_at"], (int, float), "collected_at")),
        tuple(_file(f) for f in d["files"]), tuple(_left_out(e) for e in d["left_out"]),
        tuple(typed(e, str, "errors") for e in d["errors"]),
    )  # fmt: skip


def loads(text: str, source: str) -> CollectRecord:
    """Read a collect.json back; InputError naming ``source`` when it is not collect/1."""
    try:
        return _record(json.loads(text))
    except (ValueError, RecursionError) as exc:  # json's errors are ValueErrors too
        raise InputError(f"{source}: not an {schemas.COLLECT} record: {exc}") from None
