"""The stamp ``envtool install`` and ``envtool fix`` leave in a prefix: which lock made it.
Read here with the standard library alone (the node side, Python 3.9): bounded, its fields
checked, anything else None (a stamp is what someone could write; it is said, never trusted
over the records)."""

from __future__ import annotations

import json
import os
import re
from typing import Any

SCHEMA = "envtool.stamp/1"
STAMP = "conda-meta/envtool-lock"  # JSON, but not *.json: conda and rattler read those as records
MAX_BYTES = 4096
_HEX64 = re.compile(r"[0-9a-f]{64}")
_FIELDS = {"schema", "lock_sha256", "lock", "platform", "envtool", "installed"}


def read(prefix: str) -> dict[str, Any] | None:
    """The stamp of ``prefix`` as its fields, or None: absent, too long, not this schema."""
    path = os.path.join(prefix, STAMP)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_BYTES:
        return None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(doc, dict) or set(doc) != _FIELDS or doc.get("schema") != SCHEMA:
        return None
    if not all(isinstance(doc[k], str) and len(doc[k]) <= 200 for k in _FIELDS):
        return None
    if not _HEX64.fullmatch(doc["lock_sha256"]):
        return None
    return doc
