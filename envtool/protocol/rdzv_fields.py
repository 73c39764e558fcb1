"""The strict reader of a node's ``rendezvous`` part (envtool.rendezvous/1) into
rdzv_types.RendezvousCheck: every value checked and cut; anything else is Malformed."""

from __future__ import annotations

import math
from typing import Any

from envtool.protocol import schemas
from envtool.protocol.fields import Malformed, count, mapping, number, string, strings
from envtool.protocol.rdzv_types import Listen, Reach, RendezvousCheck

MAX_ADDRESSES = 64
MAX_PEERS = 4096


def _flag(doc: dict[str, Any], key: str) -> bool:
    value = doc.get(key)
    if not isinstance(value, bool):
        raise Malformed(f"'{key}' must be true or false")
    return value


def _span(doc: dict[str, Any], key: str) -> tuple[float, float] | None:
    """``[start, end]`` in seconds since the epoch (the node's clock), or None (an older
    node sent none)."""
    value = doc.get(key)
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                    and math.isfinite(v) and 0 <= v < 1e11 for v in value)
            and value[0] <= value[1]):  # fmt: skip
        raise Malformed(f"'{key}' must be [start, end] in seconds since the epoch")
    return float(value[0]), float(value[1])


def _reach(value: Any) -> Reach | None:
    if value is None:
        return None
    doc = mapping(value, "rendezvous reach")
    return Reach(_flag(doc, "ok"), string(doc, "error", 200) or "", number(doc, "seconds"),
                 string(doc, "address", 100) or "", _span(doc, "tried"))  # fmt: skip


def _listen(value: Any) -> Listen | None:
    if value is None:
        return None
    doc = mapping(value, "rendezvous listen")
    return Listen(
        _flag(doc, "ok"), string(doc, "error", 300) or "",
        strings(doc.get("peers"), "rendezvous listen peers", MAX_PEERS, 200),
        string(doc, "cause", 50) or "", string(doc, "holder", 200) or "", _span(doc, "open"),
        min(count(doc, "strangers", 0), MAX_PEERS),
    )  # fmt: skip


def read_rendezvous(value: Any) -> RendezvousCheck:
    """envtool.rendezvous/1 → RendezvousCheck."""
    doc = mapping(value, "rendezvous")
    if doc.get("schema") != schemas.RENDEZVOUS:
        raise Malformed(f"rendezvous: schema {str(doc.get('schema'))[:60]!r}")
    role = string(doc, "role", 10)
    if role not in ("host", "peer"):
        raise Malformed("rendezvous: 'role' must be host or peer")
    port = count(doc, "port")
    if not 0 < port < 65536:
        raise Malformed("rendezvous: 'port' must be 1-65535")
    return RendezvousCheck(
        string(doc, "host", 253) or "", port, role,
        strings(doc.get("addresses"), "rendezvous addresses", MAX_ADDRESSES, 100),
        string(doc, "error", 200) or "", _reach(doc.get("reach")), _listen(doc.get("listen")),
        count(doc, "nodes", 0),
    )  # fmt: skip
