"""Checked reads of one JSON value from a node: each type and range checked, each string cut
to a length, anything else ``Malformed`` (envtool/protocol/documents.py reads documents with
these)."""

from __future__ import annotations

import math
import re
from typing import Any

MAX_INT = 2**62  # a count, size or time beyond this is no measurement
_IDS = {  # what tells machines apart (envtool_node/facts.py: machine_ids)
    "machine_id": re.compile(r"[0-9a-f]{32}"),  # /etc/machine-id
    "boot_id": re.compile(r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}"),  # this boot's uuid
}


_TOO_LONG = re.compile(r"[:\[,]\s*-?(\d{300,})")  # in a value's place (the largest float: 309)


class Malformed(ValueError):
    """A document (or a part of one) that does not have the shape its schema promises."""


def long_number_line(text: str) -> int:
    """The line of the first number in a JSON text too long to be a float (JSON reads it as
    an int, ``float()`` raises OverflowError on it); 0 when there is none."""
    found = _TOO_LONG.search(text)
    return text.count("\n", 0, found.start(1)) + 1 if found else 0


def string(doc: dict[str, Any], key: str, limit: int = 200) -> str | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise Malformed(f"'{key}' is {type(value).__name__}, expected a string")
    return str(value)[:limit]


def integer(doc: dict[str, Any], key: str, default: int | None = None) -> int:
    value = doc.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise Malformed(f"'{key}' must be an integer")
    if abs(value) > MAX_INT:
        raise Malformed(f"'{key}' is out of range")
    return value


def count(doc: dict[str, Any], key: str, default: int | None = None) -> int:
    value = integer(doc, key, default)
    if value < 0:
        raise Malformed(f"'{key}' must not be negative")
    return value


def number(doc: dict[str, Any], key: str) -> float:
    value = doc.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise Malformed(f"'{key}' must be a number")
    if not (0 <= value <= MAX_INT) or (isinstance(value, float) and not math.isfinite(value)):
        raise Malformed(f"'{key}' must be a finite number from 0 to 2**62")
    return float(value)


def mapping(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Malformed(f"{what} must be an object")
    return value


def listing(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Malformed(f"{what} must be a list")
    return value


def strings(value: Any, what: str, limit: int, cut: int) -> tuple[str, ...]:
    """A list of at most ``limit`` strings (the rest dropped), each cut to ``cut``
    characters; anything else in it is Malformed, not left out in silence."""
    items = listing(value, what)[:limit]
    if not all(isinstance(item, str) for item in items):
        raise Malformed(f"{what} must be a list of strings")
    return tuple(item[:cut] for item in items)


def identifier(doc: dict[str, Any], key: str) -> str:
    """A machine's or boot's id as the node sent it when it has that id's shape, else "" (no
    id is better than a made-up one: an id only ever groups a node with others)."""
    value = doc.get(key)
    return value if isinstance(value, str) and _IDS[key].fullmatch(value) else ""
