"""protocol/rdzv_fields.py: a node's rendezvous part read strictly, from what reach.py really
writes and from hostile variants; read_node carries it to the HostReport."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from envtool.protocol.documents import read_node
from envtool.protocol.fields import Malformed
from envtool.protocol.rdzv_fields import read_rendezvous
from envtool.protocol.rdzv_types import Reach
from envtool.protocol.types import ProblemKind
from envtool_node import reach


def _written() -> dict[str, Any]:
    """What reach.check writes on a store's node that nobody else greets (a real listener)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return reach.check(reach.Ask(f"127.0.0.1:{port}", 2, 0.5, "host"), "n1")


def test_what_a_node_writes_is_read() -> None:
    doc = _written()
    check = read_rendezvous(doc)
    assert check.is_host and check.addresses == ("127.0.0.1",) and check.nodes == 2
    assert check.reach is not None and check.reach.ok and check.reach.address == "127.0.0.1"
    assert check.listen is not None and check.listen.ok and check.listen.peers == ("n1",)
    assert check.listen.open is not None and check.reach.tried is not None
    assert check.listen.open[0] <= check.reach.tried[0] <= check.reach.tried[1]
    ok = {"ok": False, "seconds": 1, "tried": [1.0, 2.0]}  # the shape the refusals below break
    assert read_rendezvous({**doc, "reach": ok}).reach == Reach(False, "", 1.0, "", (1.0, 2.0))


@pytest.mark.parametrize(
    "change",
    [{"schema": "envtool.rendezvous/9"}, {"role": "boss"}, {"port": 0}, {"port": "29400x"},
     {"reach": {"ok": "yes", "seconds": 1}}, {"listen": {"ok": True, "peers": "n1"}},
     {"addresses": "127.0.0.1"}, {"reach": {"ok": True, "seconds": -1}},
     {"reach": {"ok": False, "seconds": 1, "tried": [2.0, 1.0]}},
     {"reach": {"ok": False, "seconds": 1, "tried": [1.0, float("nan")]}},
     {"reach": {"ok": False, "seconds": 1, "tried": "now"}},
     {"listen": {"ok": True, "peers": [], "open": [1.0]}},
     {"listen": {"ok": True, "peers": [], "open": [True, 2.0]}},
     {"addresses": ["10.0.0.1", 7]}, {"listen": {"ok": True, "peers": ["n1", None]}}],
)  # fmt: skip
def test_a_malformed_part_is_refused(change: dict[str, Any]) -> None:
    with pytest.raises(Malformed):
        read_rendezvous({**_written(), **change})


def test_long_values_are_cut_and_the_part_reaches_the_document() -> None:
    doc = {**_written(), "host": "h" * 1000, "addresses": ["a" * 500] * 100}
    check = read_rendezvous(doc)
    assert len(check.host) == 253 and len(check.addresses) == 64
    text = json.dumps({"schema": "envtool.node/1", "node": "n1", "prefix": "/p",
                       "facts": None, "allreduce": None, "rendezvous": _written()})  # fmt: skip
    node = read_node(text, "n1")
    assert node.rendezvous is not None and node.rendezvous.port > 0
    bad = json.dumps({"schema": "envtool.node/1", "node": "n1", "rendezvous": {"role": 1}})
    problems = read_node(bad, "n1").problems
    assert [(p.part, p.kind) for p in problems][:1] == [("rendezvous", ProblemKind.MALFORMED)]
