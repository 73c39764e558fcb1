"""``envtool fix --format junit`` (report/fix_junit.py): a testcase per node; a drifted node
is a failure of the plan, a node whose fix failed or that still drifts afterwards a failure of
the fix, a node fixed or matching a pass. Records as nodes answer them (fix-node/1)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from envtool.protocol.fix_record import ChangeEntry, FixRecord, failed
from envtool.protocol.verify_report import FindingEntry, VerifyDocument
from envtool.report import fix_junit

NCCL = ChangeEntry(
    "replace", "nccl", "conda", "nccl=2.16.5.1=h0800d71_0", "nccl=2.18.3.1=h12f7317_0"
)


def _rec(changes: tuple[ChangeEntry, ...] = (), applied: bool = False) -> FixRecord:
    gen = "env.envtool-gen-1" if applied else ""
    return FixRecord("/envs/env", changes, applied, gen, "exchange" if applied else "", (), (),
                     0, "", "")  # fmt: skip


def _cases(xml: str) -> dict[str, str | None]:
    root = ET.fromstring(xml.split("\n", 1)[1])
    out = {}
    for case in root.iter("testcase"):
        failure = case.find("failure")
        out[case.get("classname") or ""] = None if failure is None else failure.get("type")
    return out


def test_the_plan_fails_the_drifted_nodes() -> None:
    plans = {"node1": _rec(), "node2": _rec((NCCL,)), "node3": failed("/envs/env", "no conda-meta")}
    assert _cases(fix_junit.render(plans, {}, None)) == {
        "node1": None, "node2": "drift", "node3": "error"
    }  # fmt: skip


def test_after_the_fix_only_what_still_drifts_or_failed() -> None:
    plans = {"node1": _rec(), "node2": _rec((NCCL,)), "node3": _rec((NCCL,))}
    done = {"node2": _rec((NCCL,), applied=True), "node3": _rec((NCCL,), applied=True)}
    drift = FindingEntry("version-differs", "error", "nccl", "2.18.3.1", "2.16.5.1", "", ("node3",))
    after = VerifyDocument("conda-lock.yml", 1.0, False, (), (drift,))
    xml = fix_junit.render(plans, done, after)
    assert _cases(xml) == {"node1": None, "node2": None, "node3": "drift"}
    assert 'failures="1"' in xml and "env.envtool-gen-1 (exchange)" in xml


def test_the_text_says_the_processes_it_could_not_read(capsys: object) -> None:
    """A node whose prune removed a generation while 2 processes could not be read (another
    user's: their maps are closed to this one): the text says so, never a silent removal."""
    from dataclasses import replace

    from envtool.report import fix_text

    done = {"node2": replace(_rec((NCCL,), applied=True), removed=("env.envtool-gen-0",),
                             unread=2)}  # fmt: skip
    after = VerifyDocument(None, 1.0, True, (), ())
    fix_text.show_result(after, after, {"node2": _rec((NCCL,))}, done, "text")
    out = " ".join(capsys.readouterr().out.split())  # type: ignore[attr-defined]
    assert "removed: env.envtool-gen-0" in out
    assert "not checked: 2 processes this user cannot read" in out
    assert "run the fix as root to check them" in out
