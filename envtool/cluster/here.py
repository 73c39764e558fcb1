"""This machine as a node, in this process: the node package's own collectors (the code a node
runs during verify: envtool_node.gpus, export, limits, network) called here with no
subprocess and no torch, their document read by the node protocol like any node's answer
(``preflight --quick``; doctor's gpus and network steps).

The parts are called one by one rather than through ``envtool_node.node.collect``: that entry
point imports the all-reduce launcher and the rendezvous check (tens of milliseconds a Slurm
prolog pays on every node for nothing). Each part is guarded and the export refused as the
node does it: the same functions (envtool_node.parts).
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envtool.protocol.answers import from_document
from envtool.protocol.documents import read_node
from envtool.protocol.types import HostReport

QUICK_PARTS = ("export", "gpus", "limits", "network")


def _collectors(prefix: str) -> dict[str, Callable[[], dict[str, Any]]]:
    def gpus() -> dict[str, Any]:
        from envtool_node import gpus

        return gpus.collect()

    def limits() -> dict[str, Any]:
        from envtool_node import limits

        return limits.collect()

    def network() -> dict[str, Any]:
        from envtool_node import network

        return network.collect(os.environ)

    def export() -> dict[str, Any]:
        from envtool_node.parts import export

        return export(prefix)

    return {"gpus": gpus, "export": export, "limits": limits, "network": network}


def document(prefix: Path | None, parts: tuple[str, ...] = QUICK_PARTS) -> dict[str, Any]:
    """The node document of this machine with ``parts`` (no export without a prefix); a part
    that raises is its error, as on a node (envtool_node.parts)."""
    from envtool_node import schema
    from envtool_node.parts import guarded

    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    doc: dict[str, Any] = {"schema": schema.NODE, "prefix": str(prefix or ""), "node": node}
    collectors = _collectors(str(prefix or ""))
    for part in parts:
        if part == "export" and prefix is None:
            continue
        guarded(doc, part, collectors[part])
    return doc


def report(prefix: Path | None, parts: tuple[str, ...] = QUICK_PARTS) -> HostReport:
    """This machine's HostReport, read strictly like any node's answer; named as the node
    names itself (Slurm's node name, else the host name)."""
    started, clock = time.monotonic(), time.time()
    read = read_node(json.dumps(document(prefix, parts)), "this machine")
    return from_document(read.node or "localhost", read, time.monotonic() - started, clock)
