"""The pieces of envtool's strict JSON readers (explain/1, collect/1): an object must have
exactly a dataclass's fields, each value its type (no bool for a number), numbers in range.
A reader raises ``Bad`` and turns it into one InputError naming its file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any


class Bad(ValueError):
    """What a strict reader found wrong (its caller names the file)."""


def obj(
    value: Any, cls: type, extra: frozenset[str] = frozenset(), names: Mapping[str, str] = {}
) -> dict[str, Any]:
    """``value`` as an object with exactly ``cls``'s fields (``names``: a field's JSON name
    where it differs, ``extra``: keys beside them)."""
    if not isinstance(value, dict):
        raise Bad(f"a {cls.__name__} must be an object")
    want = {names.get(f.name, f.name) for f in fields(cls)} | extra
    if set(value) != want:
        raise Bad(f"{cls.__name__}: unexpected or missing fields {sorted(set(value) ^ want)}")
    return value


def typed(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    """``value`` when it is of ``kind`` (a bool is no number), a number within 0..2**62."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in kinds):
        raise Bad(f"'{what}' must be {' or '.join(k.__name__ for k in kinds)}")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not 0 <= value <= 2**62:
        raise Bad(f"'{what}' is out of range")
    return value
