"""The strict reader of the limits part of a node's document (envtool.limits/1) and of its
clock entry, into protocol/limit_types.py; anything that does not fit is ``Malformed``."""

from __future__ import annotations

from typing import Any

from envtool.protocol import schemas
from envtool.protocol.fields import MAX_INT, Malformed, count, mapping, number, string
from envtool.protocol.limit_types import UNLIMITED, ClockReading, Limits


def _pair(doc: dict[str, Any], key: str) -> tuple[int, int]:
    """[soft, hard] of a resource limit, each a count or -1 (unlimited)."""
    value = doc.get(key)
    if not (isinstance(value, list) and len(value) == 2):
        raise Malformed(f"'{key}' must be [soft, hard]")
    for item in value:
        ok = isinstance(item, int) and not isinstance(item, bool)
        if not ok or not (UNLIMITED <= item <= MAX_INT):
            raise Malformed(f"'{key}' must hold two counts (-1: unlimited)")
    return value[0], value[1]


def read_limits(value: Any) -> Limits:
    """envtool.limits/1 → Limits."""
    doc = mapping(value, "the limits")
    if doc.get("schema") != schemas.LIMITS:
        raise Malformed("not an envtool.limits/1 document")
    shm = None if doc.get("shm_bytes") is None else count(doc, "shm_bytes")
    return Limits(
        shm,
        string(doc, "shm_error", 300) or "",
        _pair(doc, "nofile"),
        _pair(doc, "memlock"),
        string(doc, "kernel", 100) or "",
        string(doc, "glibc", 40),
    )


def read_clock(value: Any) -> ClockReading:
    """The node's ``clock`` entry: its time.time() when it printed, and its run time."""
    doc = mapping(value, "the clock")
    return ClockReading(number(doc, "time"), number(doc, "elapsed"))


PARTS = (("limits", read_limits), ("clock", read_clock))  # the node document's keys, read so
