"""``envtool fix --canary N`` (commands/fix.py): the first N drifted nodes are fixed first, the
rest only when every canary succeeded; a node that matches is never touched, a node whose
plan failed is not fixed. The nodes' answers are fix-node/1 records as nodes send them; the
transport and verify are stood in for (what they do is tested on real sshd nodes in
tests/fix/test_fix_ssh.py), so that which node is asked what is seen."""

from __future__ import annotations

from pathlib import Path

import pytest

from envtool.cluster import remote_fix
from envtool.cluster.options import FanoutOptions
from envtool.cluster.remote_fix import NodeArgs
from envtool.commands import fix
from envtool.commands.verify import VerifyArgs
from envtool.protocol.fix_record import ChangeEntry, FixRecord, failed
from envtool.protocol.verify_report import VerifyDocument

CHANGE = ChangeEntry("replace", "nccl", "conda", "nccl=2.16.5.1=h0", "nccl=2.18.3.1=h1")


def _rec(drifted: bool, applied: bool = False, error: str = "") -> FixRecord:
    return FixRecord("/envs/env", (CHANGE,) if drifted else (), applied,
                     "env.envtool-gen-1" if applied else "", "exchange" if applied else "",
                     (), (), 0, error, "")  # fmt: skip


def _run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, canary: int,
         broken: str = "") -> tuple[int, list[tuple[str, ...]]]:  # fmt: skip
    """Five nodes: node1 matches, node2..node5 drift; ``broken``'s fix fails."""
    asked: list[tuple[str, ...]] = []

    def run_all(hosts, fan, args, lock, done=None):  # type: ignore[no-untyped-def]
        names = tuple(h.label for h in hosts)
        if not args.apply:
            return {n: _rec(n != "node1") for n in names}
        asked.append(names)
        return {n: failed("/envs/env", "disk full") if n == broken else _rec(True, True)
                for n in names}  # fmt: skip

    monkeypatch.setattr(remote_fix, "run_all", run_all)
    monkeypatch.setattr(fix.fix_payload, "write", lambda *args: 0)  # the nodes are stand-ins
    monkeypatch.setattr(fix, "_before", lambda args: VerifyDocument(None, 0.0, True, (), ()))
    monkeypatch.setattr(fix, "document", lambda verdict: VerifyDocument(None, 0.0, True, (), ()))
    monkeypatch.setattr(fix.verify_command, "decide", lambda args: None)
    lock = tmp_path / "conda-lock.yml"
    lock.write_text("version: 1\n")
    verify = VerifyArgs("node[1-5]", lock, FanoutOptions(transport="ssh"))
    node = NodeArgs(("envtool",), "/envs/env", "linux-64", apply=True)
    code = fix.run(fix.FixArgs(verify, node, yes=True, canary=canary, fmt="json"))
    return code, asked


def test_the_canary_goes_first_then_the_rest(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, asked = _run(monkeypatch, tmp_path, canary=1)
    assert asked == [("node2",), ("node3", "node4", "node5")] and code == 0


def test_a_failed_canary_stops_the_rest(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    code, asked = _run(monkeypatch, tmp_path, canary=2, broken="node3")
    assert asked == [("node2", "node3")] and code == 1  # node4, node5 untouched


def test_without_a_canary_every_drifted_node_at_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, asked = _run(monkeypatch, tmp_path, canary=0, broken="node4")
    assert asked == [("node2", "node3", "node4", "node5")] and code == 1
