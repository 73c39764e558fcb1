"""The strict reader of the network part of a node's document (envtool.network/1), into
protocol/net_types.py; anything that does not fit is ``Malformed``."""

from __future__ import annotations

import math
from typing import Any

from envtool.protocol import schemas
from envtool.protocol.fields import Malformed, count, listing, mapping, string, strings
from envtool.protocol.net_types import IbPort, IfSelection, Infiniband, Interface, Network
from envtool_node.infiniband import phys_state, port_state

MAX_INTERFACES, MAX_ADDRESSES, MAX_PORTS, MAX_NAMES = 256, 32, 256, 64
NAME = 64  # an interface or device name (the kernel's are 15 characters)
HOW = ("variable", "default", "hostname")


def _flag(doc: dict[str, Any], key: str, default: bool | None = False) -> bool | None:
    value = doc.get(key, default)
    if value is not None and not isinstance(value, bool):
        raise Malformed(f"'{key}' must be true or false")
    return value


def _optional_count(doc: dict[str, Any], key: str) -> int | None:
    return None if doc.get(key) is None else count(doc, key)


def _names(value: Any, what: str, limit: int = MAX_NAMES) -> tuple[str, ...]:
    return strings(value, what, limit, NAME)


def _interface(value: Any) -> Interface:
    doc = mapping(value, "an interface")
    return Interface(
        string(doc, "name", NAME) or "?",
        _flag(doc, "up") is True,
        _flag(doc, "loopback") is True,
        _names(doc.get("addresses"), "addresses", MAX_ADDRESSES),
        _optional_count(doc, "mtu"),
        _optional_count(doc, "speed_mbps"),
    )


def _selection(value: Any, what: str) -> IfSelection | None:
    if value is None:
        return None
    doc = mapping(value, what)
    how = string(doc, "how", 20) or ""
    if how not in HOW:
        raise Malformed(f"{what}'s 'how' must be one of {', '.join(HOW)}")
    return IfSelection(
        string(doc, "variable", 40) or "",
        string(doc, "value", 1000),
        _names(doc.get("selected"), f"{what}'s selected"),
        how,
        _names(doc.get("unmatched"), f"{what}'s unmatched"),
    )


def _rate(doc: dict[str, Any]) -> float | None:
    value = doc.get("rate_gbps")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Malformed("'rate_gbps' must be a number")
    if not (math.isfinite(value) and 0 <= value <= 1e6):
        raise Malformed("'rate_gbps' is out of range")
    return float(value)


def _port(value: Any) -> IbPort:
    doc = mapping(value, "an IB port")
    return IbPort(
        string(doc, "device", NAME) or "?",
        count(doc, "port"),
        port_state(string(doc, "state", 40)),  # the kernel's words, whatever an older node
        phys_state(string(doc, "phys_state", 40)),  # sent (its bare "4", ibstat's "Active")
        _rate(doc),
        string(doc, "rate", 80),
        string(doc, "link_layer", 40),
    )


def _ib(value: Any) -> Infiniband | None:
    if value is None:
        return None
    doc = mapping(value, "the IB part")
    return Infiniband(
        _flag(doc, "present") is True,
        tuple(_port(p) for p in listing(doc.get("ports"), "IB ports")[:MAX_PORTS]),
        string(doc, "hca_variable", 1000),
        _names(doc.get("hca_missing"), "hca_missing"),
        _flag(doc, "peermem", None),
    )


def read_network(value: Any) -> Network:
    """envtool.network/1 → Network."""
    doc = mapping(value, "the network")
    if doc.get("schema") != schemas.NETWORK:
        raise Malformed("not an envtool.network/1 document")
    found = listing(doc.get("interfaces"), "interfaces")[:MAX_INTERFACES]
    return Network(
        tuple(_interface(i) for i in found),
        _selection(doc.get("nccl"), "nccl"),
        _selection(doc.get("gloo"), "gloo"),
        _ib(doc.get("ib")),
        _netns(doc.get("netns")),
    )


def _netns(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**64:
        raise Malformed("'netns' must be a namespace's inode number or null")
    return value
