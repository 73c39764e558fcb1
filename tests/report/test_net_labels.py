"""report/net_labels.py: a port switched off is worded by why it matters (NCCL_IB_HCA asks for
it, the node has no other port up) or does not (NCCL uses the node's other ports); a port
down for want of a link keeps its row's fix line. Findings from the recorded tree
(tests/fixtures/ib_tree.py) with the faults each test says."""

from __future__ import annotations

from pathlib import Path

from fixtures import ib_tree

from envtool.judge import network
from envtool.judge.findings import Kind
from envtool.judge.rules import RULES
from envtool.protocol.net_types import Infiniband, Network
from envtool.protocol.types import HostReport
from envtool.report.labels import Words, words


def _words(ib: Infiniband) -> list[Words]:
    found = network.check([HostReport("a", network=Network((), ib=ib))])
    return [words(f) for f in found]


def test_a_port_switched_off_beside_others_says_nothing_needs_doing(tmp_path: Path) -> None:
    """Changed: mlx4_0:2 switched off ("1: DOWN", "3: Disabled"), NCCL_IB_HCA unset."""
    root = ib_tree.tree(tmp_path)
    ib_tree.switch_off(root, "mlx4_0:2")
    [w] = _words(ib_tree.read(root))
    assert w.actual == (
        "DOWN / Disabled: switched off; NCCL leaves it out and uses the node's other ports"
    )
    assert w.fix.startswith("nothing, if mlx4_0:2 is meant to be off; else enable it")
    assert "NCCL_IB_HCA=^=mlx4_0:2" in w.fix


def test_a_port_switched_off_that_nccl_would_use_says_to_enable_it(tmp_path: Path) -> None:
    """Changed: mlx4_0:2 switched off, NCCL_IB_HCA=mlx4_0:2; then every port switched off."""
    root = ib_tree.tree(tmp_path)
    ib_tree.switch_off(root, "mlx4_0:2")
    [w] = _words(ib_tree.read(root, {"NCCL_IB_HCA": "mlx4_0:2"}))
    assert w.actual == "DOWN / Disabled: switched off, and NCCL_IB_HCA asks for it"
    assert w.fix.startswith("enable port mlx4_0:2 (ibportstate ... enable; RoCE: ip link set")
    ib_tree.switch_off(root, "i40iw0:1", "mlx4_0:1")
    assert {w.actual for w in _words(ib_tree.read(root))} == {
        "DOWN / Disabled: switched off, and no other port is up (NCCL falls back to sockets)"
    }


def test_a_port_without_a_link_keeps_the_rows_fix(tmp_path: Path) -> None:
    """Changed: mlx4_0:2 to "1: DOWN" / "2: Polling"."""
    root = ib_tree.tree(tmp_path)
    ib_tree.write(root, "mlx4_0:2", state="1: DOWN", phys_state="2: Polling")
    [w] = _words(ib_tree.read(root))
    fix = RULES[Kind.IB_PORT_DOWN].fix.format(subject="mlx4_0:2")
    assert (w.expected, w.actual, w.fix) == ("ACTIVE / LinkUp", "DOWN / Polling", fix)
