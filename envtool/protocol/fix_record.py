"""``envtool.fix-node/1``: what ``envtool fix --here`` prints on a node (its plan, and what it
did), its writer and its strict reader: the controller reads each node's answer with it, and
an answer that is not exactly this (a node's garbage, a forged field) is that node's error,
never another's (docs/commands/fix.md)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from envtool.errors import InputError
from envtool.protocol import schemas
from envtool.protocol.strict import Bad, obj, typed

ACTIONS = ("add", "replace", "remove")
MAX_TEXT = 400


@dataclass(frozen=True)
class ChangeEntry:
    """One package change: ``before``/``after`` as ``name=version=build`` (pip:
    ``name==version``), "" for none."""

    action: str
    name: str
    manager: str
    before: str
    after: str


@dataclass(frozen=True)
class FixRecord:
    """One node's answer."""

    prefix: str
    changes: tuple[ChangeEntry, ...]
    applied: bool
    generation: str
    switch: str
    removed: tuple[str, ...]
    kept_in_use: tuple[str, ...]  # "NAME (pids 12, 13)"
    unread: int
    error: str  # "" when it did what was asked
    stamp: str  # the sha256 of the lock that made the prefix (its stamp), "" when none
    source: str = ""  # where a fix's packages came from (counts and the cache's path, no URL)


def clipped(text: str) -> str:
    """``text`` within the reader's bound: its start and its end kept (a message says what
    failed first and its root cause last: ``... No space left on device (os error 28)``)."""
    if len(text) <= MAX_TEXT:
        return text
    half = (MAX_TEXT - 3) // 2
    return f"{text[:half]} … {text[-(MAX_TEXT - 3 - half) :]}"


def failed(prefix: str, error: str) -> FixRecord:
    """The answer of a node that did nothing (its error said, within the bound)."""
    return FixRecord(clipped(prefix), (), False, "", "", (), (), 0, clipped(error), "")


def dumps(rec: FixRecord) -> str:
    """The record's JSON text, one line."""
    return json.dumps({"schema": schemas.FIX_NODE, **asdict(rec)}, sort_keys=True) + "\n"


def _text(value: Any, what: str) -> str:
    text = typed(value, str, what)
    if len(text) > MAX_TEXT:
        raise Bad(f"'{what}' is longer than {MAX_TEXT} characters")
    return str(text)


def _texts(value: Any, what: str) -> tuple[str, ...]:
    items = typed(value, list, what)
    if len(items) > 100_000:
        raise Bad(f"'{what}' has too many entries")
    return tuple(_text(v, what) for v in items)


def _change(value: Any) -> ChangeEntry:
    d = obj(value, ChangeEntry)
    entry = ChangeEntry(*(_text(d[k], k) for k in ("action", "name", "manager", "before", "after")))
    if entry.action not in ACTIONS:
        raise Bad(f"'action' must be one of {', '.join(ACTIONS)}")
    return entry


def loads(text: str, source: str) -> FixRecord:
    """A node's answer; InputError naming ``source`` when it is not exactly a fix-node/1."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        raise InputError(f"{source}: not an envtool fix answer") from None
    if not isinstance(doc, dict) or doc.get("schema") != schemas.FIX_NODE:
        raise InputError(f"{source}: not an envtool fix answer ({schemas.FIX_NODE})")
    try:
        d = obj(doc, FixRecord, frozenset({"schema"}))
        changes = typed(d["changes"], list, "changes")
        if len(changes) > 100_000:
            raise Bad("'changes' has too many entries")
        return FixRecord(
            _text(d["prefix"], "prefix"),
            tuple(_change(c) for c in changes),
            typed(d["applied"], bool, "applied"),
            _text(d["generation"], "generation"),
            _text(d["switch"], "switch"),
            _texts(d["removed"], "removed"),
            _texts(d["kept_in_use"], "kept_in_use"),
            typed(d["unread"], int, "unread"),
            _text(d["error"], "error"),
            _text(d["stamp"], "stamp"),
            _text(d["source"], "source"),
        )
    except Bad as exc:
        raise InputError(f"{source}: not an envtool fix answer: {exc}") from None
