"""One machine listed under two names (an alias, a name and its address) is one machine: one
``same-machine`` finding names the names, and majorities count that machine once; a node
claiming another's ids cannot take that node's findings away (issue 24 L3)."""

from __future__ import annotations

import time
from pathlib import Path

from test_gpu import facts

from envtool.judge import consensus, gpu, verdict
from envtool.judge.findings import Finding, Kind, Severity
from envtool.models import Environment, Package
from envtool.protocol.facts_fields import read_facts
from envtool.protocol.types import AllReduceResult, HostReport, NodeFacts
from envtool.report import verify as report
from envtool_node import facts as node_facts

BOOT = "9d0c7829-8787-478a-bcc0-7f559da8e430"
OTHER_BOOT = "0b9d6f36-5f0c-4d55-9d1b-2a7f0c2f5e11"
MID, OTHER_MID = "3d1219c7c4c5404aaa1f6d2a48adfda4", "5e4f0f7d0e3a4c0a9b8e2f1d6c7b8a90"
POLICY = verdict.Policy(gpu.GpuPolicy(min_gpus=0))
LOCK = Environment("conda-lock.yml", "lock", (Package("nccl", "2.18.3.1", "h0"),))


def _machine(name: str, boot: str = BOOT, mid: str = MID, **kw: object) -> NodeFacts:
    return facts(hostname=name, boot_id=boot, machine_id=mid, **kw)


def _env(*pkgs: Package) -> Environment:
    return Environment("x", "probe", pkgs)


def _same(found: list[Finding]) -> list[tuple[str, ...]]:
    return [f.hosts for f in found if f.kind is Kind.SAME_MACHINE]


def test_two_names_of_one_machine_are_one_finding_and_one_vote() -> None:
    """node1 and node1-alias answer from one machine; node2 has another torch. Counted by
    name that is a 2-1 majority against node2; counted by machine it is 1-1: no majority."""
    rs = [
        HostReport("node1", facts=_machine("node1")),
        HostReport("node1-alias", facts=_machine("node1")),
        HostReport("node2", facts=_machine("node2", OTHER_BOOT, OTHER_MID, torch="2.3.0")),
    ]
    found = verdict.decide(rs, None, POLICY)
    (same,) = [f for f in found if f.kind is Kind.SAME_MACHINE]
    assert same.hosts == ("node1", "node1-alias") and same.severity is Severity.ERROR
    assert same.subject == "node1" and "node1, node1-alias: one machine" in same.actual
    assert BOOT in same.actual and MID in same.actual
    (torch,) = [f for f in found if f.subject == "torch"]
    assert torch.kind is Kind.VERSION_MISMATCH and torch.cause == consensus.NO_MAJORITY
    assert torch.spread == (("2.1.0", ("node1", "node1-alias")), ("2.3.0", ("node2",)))
    rs.append(HostReport("node3", facts=_machine("node3", OTHER_BOOT, MID)))  # 2 of 3 machines
    (torch,) = [f for f in verdict.decide(rs, None, POLICY) if f.subject == "torch"]
    assert (torch.hosts, torch.expected, torch.actual) == (("node2",), "2.1.0", "2.3.0")


def test_the_summary_and_the_cross_node_run_count_the_machine_once() -> None:
    member = AllReduceResult("gloo", 0, member=True)
    result = AllReduceResult("gloo", 3)
    rs = (
        HostReport("node1", facts=_machine("node1"), allreduce=result),
        HostReport("node1-alias", facts=_machine("node1"), allreduce=member),
        HostReport("node2", facts=_machine("node2", OTHER_BOOT), allreduce=member),
    )
    found = tuple(verdict.decide(list(rs), None, POLICY))
    v = verdict.Verdict(rs, found, "", 1.0)
    assert v.machines == (("node1", "node1-alias"), ("node2",))
    text = report.render(v, width=200)
    first = text.splitlines()[0]
    assert first.startswith("1 of 2 hosts (3 names) fails: node1 = node1-alias ("), text
    assert "2 hosts (3 names), 3 answered" in text
    clean = report.render(verdict.Verdict(rs, (), "", 1.0), width=200)  # what "all good" says
    assert clean.startswith("2 hosts (3 names) pass\n"), clean
    assert "all-reduce: one run across 2 hosts (3 names)" in clean, clean


def test_containers_and_other_machines_stay_apart() -> None:
    """Containers on one host share its boot id but have their own hostname; two machines
    may share a hostname, never a boot id; two machine-ids under one boot are two machines;
    an answer without a boot id (an older probe) is a machine of its own."""
    cases = [
        (_machine("c1"), _machine("c2")),  # containers: own UTS hostname
        (_machine("n"), _machine("n", OTHER_BOOT)),
        (_machine("n"), _machine("n", mid=OTHER_MID)),
        (_machine("n", boot=""), _machine("n", boot="")),
        (_machine("", boot=BOOT), _machine("", boot=BOOT)),
    ]
    for a, b in cases:
        rs = [HostReport("a", facts=a), HostReport("b", facts=b)]
        assert consensus.machine_groups(rs) == (("a",), ("b",)), (a, b)
        assert not _same(verdict.decide(rs, None, POLICY))
    rs = [HostReport("a", facts=_machine("n")), HostReport("b", facts=_machine("n", mid=""))]
    assert consensus.machine_groups(rs) == (("a", "b"),)  # only one of them sent a machine-id
    rs = [HostReport("a", facts=_machine("n")), HostReport("b")]  # b sent no facts
    assert consensus.machine_groups(rs) == (("a",), ("b",))


def test_a_node_claiming_another_nodes_ids_cannot_hide_its_drift() -> None:
    """``liar`` sends victim's hostname, boot id and machine-id, and is listed first (a
    'keep the first name' rule would drop victim's answer). victim's drift against the lock
    and against the other nodes is still named; the lie is a same-machine finding."""
    good = _env(*LOCK.packages, Package("numpy", "1.26.4", "0"))
    drifted = _env(Package("nccl", "2.16.5.1", "h1"), Package("numpy", "2.0.0", "0"))
    odd = (("NCCL_SOCKET_IFNAME", "eth9"),)
    rs = [
        HostReport("liar", env=good, facts=_machine("victim")),
        HostReport("victim", env=drifted, facts=_machine("victim", env=odd)),
        *[HostReport(h, env=good, facts=_machine(h, OTHER_BOOT, OTHER_MID)) for h in ("n2", "n3")],
    ]
    found = verdict.decide(rs, LOCK, POLICY)
    by = {(f.kind, f.subject): f for f in found}
    assert _same(found) == [("liar", "victim")]
    assert by[(Kind.VERSION_DIFFERS, "nccl")].hosts == ("victim",)
    assert by[(Kind.DIFFERS_FROM_MAJORITY, "numpy")].hosts == ("victim",)
    assert by[(Kind.NCCL_ENV_DIFFERS, "NCCL_SOCKET_IFNAME")].hosts == ("victim",)
    # the liar's own answer stays its own: lying with a drift of its own names the liar
    rs[0] = HostReport("liar", env=drifted, facts=_machine("victim"))
    found = verdict.decide(rs, LOCK, POLICY)
    (nccl,) = [f for f in found if (f.kind, f.subject) == (Kind.VERSION_DIFFERS, "nccl")]
    assert nccl.hosts == ("liar", "victim")


def test_a_split_machine_vote_changes_no_majority_more_than_an_honest_extra_node() -> None:
    """A liar merged into another machine moves half a vote from it to the liar's value:
    the same majority (or none) as if it had answered honestly as a node of its own."""
    values = {"a": "x", "liar": "x", "c": "y", "d": "y", "e": "y"}
    assert consensus.majority(values) == "y"
    assert consensus.majority(values, {"liar": "c", "c": "c"}) == "y"
    values["b"] = "x"  # 3-3 by name: no majority, with or without the lie
    assert consensus.majority(values) is None
    assert consensus.majority(values, {"liar": "c", "c": "c"}) is None


def test_hostile_ids_are_dropped_and_bounded() -> None:
    doc = {"schema": "envtool.gpu-facts/1", "hostname": "h" * 10**6, "boot_id": BOOT.upper(),
           "machine_id": MID + "\n" + "x" * 10**6}  # fmt: skip
    start = time.monotonic()
    got = read_facts(doc)
    assert (got.machine_id, got.boot_id, len(got.hostname)) == ("", "", 200)
    assert time.monotonic() - start < 2
    for bad in ({"boot_id": 5}, {"machine_id": ["a"]}, {"boot_id": "../" * 12}):
        got = read_facts({"schema": "envtool.gpu-facts/1", **bad})
        assert (got.machine_id, got.boot_id) == ("", "")
    assert read_facts({"schema": "envtool.gpu-facts/1", "boot_id": BOOT}).boot_id == BOOT


def test_the_node_reads_its_ids_bounded(tmp_path: Path) -> None:
    """This machine's ids have their shapes; a device or a huge file is read 128 bytes."""
    ids = node_facts.machine_ids()
    assert ids["boot_id"] is not None and node_facts.BOOT_ID.fullmatch(ids["boot_id"])
    assert node_facts.collect(use_torch=False, use_runtime=False)["boot_id"] == ids["boot_id"]
    assert node_facts._read_id("/dev/zero", node_facts.MACHINE_ID) is None
    big = tmp_path / "machine-id"
    big.write_text(MID + "\n" + "0" * 10**7)
    assert node_facts._read_id(str(big), node_facts.MACHINE_ID) is None
    big.write_text(MID.upper() + "\n")
    assert node_facts._read_id(str(big), node_facts.MACHINE_ID) == MID
    assert node_facts._read_id(str(tmp_path / "absent"), node_facts.MACHINE_ID) is None
