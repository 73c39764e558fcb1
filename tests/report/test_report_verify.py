"""The verify report: JUnit counts per host and check, the words of findings, folding."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace

from envtool.judge import gpu, unchecked, verdict
from envtool.judge.findings import Check
from envtool.models import Environment, Package
from envtool.protocol.limit_types import Limits
from envtool.protocol.net_types import IfSelection, Interface, Network
from envtool.protocol.types import Failure, HostReport, NodeFacts, Outcome
from envtool.report import junit
from envtool.report import verify as report

FACTS = NodeFacts(python="3.9.18", torch="2.1.0", cuda_available=True, device_count=8)


def _verdict() -> verdict.Verdict:
    lock = Environment(
        "conda-lock.yml",
        "lock",
        (Package("pytorch", "2.1.0", "cuda118_0"), Package("nccl", "2.18.3.1", "h0")),
    )
    cpu = Environment(
        "x", "probe", (Package("pytorch", "2.1.0", "cpu_0"), Package("nccl", "2.18.3.1", "h0"))
    )
    rs = [HostReport(h, env=cpu, facts=FACTS) for h in ("gpu01", "gpu02")]
    rs.append(HostReport("gpu03", Failure(Outcome.SSH_FAILED, "Connection refused", 255)))
    policy = verdict.Policy(gpu.GpuPolicy(min_gpus=8))
    found = verdict.decide(rs, lock, policy)
    return verdict.Verdict(tuple(rs), tuple(found), "conda-lock.yml", 1.0)


def test_junit_counts_one_failure_per_host_and_check() -> None:
    xml = ET.fromstring(junit.render(report.document(_verdict())))
    suite = xml.find("testsuite")
    assert suite is not None and suite.get("tests") == str(3 * len(Check))
    assert suite.get("failures") == "3"  # build on gpu01 and gpu02, reachable on gpu03
    failing = {
        (c.get("classname"), c.get("name"))
        for c in suite.iter("testcase")
        if c.find("failure") is not None
    }
    assert failing == {("gpu01", "lock"), ("gpu02", "lock"), ("gpu03", "reachable")}


def test_a_check_that_did_not_run_is_skipped_never_passed() -> None:
    """gpu03 is unreachable: its lock, gpu, runtime... checks did not run (skipped, with why);
    no all-reduce ran anywhere: each host's allreduce check is skipped too."""
    xml = ET.fromstring(junit.render(report.document(_verdict())))
    cases = {(c.get("classname"), c.get("name")): c for c in xml.iter("testcase")}
    for check in Check:
        case = cases[("gpu03", check.value)]
        if check is Check.REACHABLE:
            assert case.find("failure") is not None
        else:
            skipped = case.find("skipped")
            assert skipped is not None and skipped.get("message") == (
                "not checked: unreachable on this host"
            ), check
    gpu01 = cases[("gpu01", "allreduce")].find("skipped")
    assert (
        gpu01 is not None and gpu01.get("message") == "not checked: no all-reduce ran on this host"
    )
    assert cases[("gpu01", "runtime")].find("skipped") is None  # it ran, and passed


def test_findings_are_worded_where_the_report_is_made() -> None:
    doc = report.document(_verdict())
    by_kind = {f.kind: f for f in doc.findings}
    build = by_kind["build-differs"]
    assert (build.expected, build.actual) == ("pytorch=2.1.0=cuda118_0", "pytorch=2.1.0=cpu_0")
    assert build.hint == "install pytorch=2.1.0=cuda118_0" and build.hosts == ("gpu01", "gpu02")
    unreachable = by_kind["unreachable"]
    assert unreachable.actual == "ssh failed: Connection refused"
    assert [h.error for h in doc.hosts] == [None, None, "ssh failed: Connection refused"]
    assert doc.ok is False


def test_all_good_says_what_it_compared(capsys) -> None:  # type: ignore[no-untyped-def]
    from envtool.protocol.types import Runtime

    loaded = NodeFacts(python="3.9.18", runtime=Runtime(executable="/e/bin/python"))
    rs = (HostReport("a", facts=loaded), HostReport("b", facts=FACTS))
    report.show(verdict.Verdict(rs, (), "conda-lock.yml", 1.0), "table", None)
    out = capsys.readouterr().out.replace("\n  ", " ")  # lines folded to the width, unfolded
    assert out.startswith("2 hosts pass\n2 hosts, 2 answered, 0 findings")
    last = out.split("\n\n")[-1].replace("\n  ", " ")  # the verdict line, folded to the width
    assert last.startswith("all good: compared against the lock") and "all-reduce: none" in last
    assert "against the lock and each other: package records and their hashes" in out
    assert "what each python loads" in out and "no runtime from 1 host(s)" in out
    assert "all-reduce: none run (--allreduce off)" in out
    report.show(verdict.Verdict(rs[:1], (), "", 1.0), "table", None)
    assert "compared between the nodes:" in capsys.readouterr().out


def test_all_good_says_which_links_the_all_reduce_crossed(capsys) -> None:  # type: ignore[no-untyped-def]
    """bisect meets only some pairs: "all good" says how many of them, never more."""
    from envtool.protocol.types import AllReduceResult, PairRun, PairsRun

    rs = tuple(HostReport(h, facts=FACTS) for h in ("a", "b", "c", "d"))
    result = AllReduceResult("gloo", 2)
    run = PairsRun((PairRun("a", "d", 1, result), PairRun("b", "c", 1, result)), 1, 9.0)
    report.show(verdict.Verdict(rs, (), "", 1.0, run), "table", None)
    said = " ".join(capsys.readouterr().out.split())  # as wide as the terminal: lines fold
    assert "all-reduce: between 2 of the 6 node pairs, in 1 rounds" in said
    alone = tuple(HostReport(h, facts=FACTS, allreduce=AllReduceResult("gloo", 2)) for h in "ab")
    report.show(verdict.Verdict(alone, (), "", 1.0), "table", None)
    said = " ".join(capsys.readouterr().out.split())
    assert "each of 2 host(s) on its own: no link between the nodes" in said


def test_network_and_limits_findings_are_testcases_of_their_hosts() -> None:
    """gpu01's NCCL_SOCKET_IFNAME selects nothing (network), gpu02's /dev/shm is 64 MiB
    (limits), gpu03's node sent neither part: its network and limits checks did not run."""
    eth0 = Interface("eth0", True, False, ("10.0.0.1/24",), 1500)
    eth9 = IfSelection("NCCL_SOCKET_IFNAME", "eth9", (), "variable")
    good = IfSelection("NCCL_SOCKET_IFNAME", None, ("eth0",), "default")
    roomy = Limits(2**34, "", (65536, 65536), (-1, -1), "6.1.0", "2.36")
    rs = [
        HostReport("gpu01", facts=FACTS, network=Network((eth0,), eth9), limits=roomy),
        HostReport("gpu02", facts=FACTS, network=Network((eth0,), good),
                   limits=replace(roomy, shm_bytes=64 * 2**20)),
        HostReport("gpu03", facts=FACTS),
    ]  # fmt: skip
    found = verdict.decide(rs, None, verdict.Policy(gpu.GpuPolicy(min_gpus=0)))
    assert {(f.kind.value, f.hosts) for f in found} >= {
        ("socket-ifname-unmatched", ("gpu01",)),
        ("shm-small", ("gpu02",)),
    }
    doc = report.document(verdict.Verdict(tuple(rs), tuple(found), "", 1.0))
    xml = ET.fromstring(junit.render(doc))
    cases = {(c.get("classname"), c.get("name")): c for c in xml.iter("testcase")}
    failure = cases[("gpu01", "network")].find("failure")
    assert failure is not None and failure.get("type") == "socket-ifname-unmatched"
    assert "eth9" in (failure.get("message") or "")
    failure = cases[("gpu02", "limits")].find("failure")
    assert failure is not None and failure.get("type") == "shm-small"
    for name in ("limits", "network"):  # the other host's same check ran, and passed
        other = "gpu02" if name == "network" else "gpu01"
        case = cases[(other, name)]
        assert case.find("failure") is None and case.find("skipped") is None, (other, name)
    for name in ("network", "limits"):
        skipped = cases[("gpu03", name)].find("skipped")
        assert skipped is not None, name
        assert skipped.get("message") == f"not checked: this host sent no {name} part"


def test_parts_a_node_did_not_send_are_said_beside_all_good(capsys) -> None:  # type: ignore[no-untyped-def]
    """A node answer without its gpus part (a hand-made or older document) is judged on what
    it holds, and the report says which check had nothing to go on: beside "all good", in the
    JSON's ``unchecked`` and as JUnit ``<skipped>``. A part that failed says so itself (its
    probe-failed finding), and an unreachable host is a finding of its own: neither is listed."""
    from envtool.protocol.gpu_types import GpuLayer
    from envtool.protocol.types import Problem, ProblemKind

    net = Network((Interface("eth0", True, False, ("10.0.0.1/24",), 1500),), None)
    roomy = Limits(2**34, "", (65536, 65536), (-1, -1), "6.1.0", "2.36")
    failed = Problem("gpus", ProblemKind.FAILED, "RuntimeError: boom")
    rs = [
        HostReport(
            "a", facts=FACTS, gpus=GpuLayer("none", why="no driver"), network=net, limits=roomy
        ),
        HostReport("b", facts=FACTS, network=net, limits=roomy),
        HostReport("c", facts=FACTS, network=net, limits=roomy, problems=(failed,)),
        HostReport("d", failure=Failure(Outcome.SSH_FAILED, "no route")),
    ]
    assert unchecked.missing_parts(rs) == ("gpus on b (not in the node's answer)",)
    many = [HostReport(f"n{i}", facts=FACTS) for i in range(5)]
    assert (
        unchecked.missing_parts(many)[0]
        == "gpus on n0, n1, n2 and 2 more (not in the node's answer)"
    )
    result = verdict.Verdict(tuple(rs[:2]), (), "", 1.0, unchecked=unchecked.missing_parts(rs))
    report.show(result, "table", None)
    said = " ".join(capsys.readouterr().out.split())
    assert "all good" in said and "not checked: gpus on b (not in the node's answer)" in said
    doc = report.document(result)
    assert doc.unchecked == ("gpus on b (not in the node's answer)",)
    cases = {
        (c.get("classname"), c.get("name")): c
        for c in ET.fromstring(junit.render(doc)).iter("testcase")
    }
    skipped = cases[("b", "gpu")].find("skipped")
    assert (
        skipped is not None and skipped.get("message") == "not checked: this host sent no gpus part"
    )
    assert cases[("a", "gpu")].find("skipped") is None


def test_all_good_says_which_gpus_it_read_hosts_alike_folded(capsys) -> None:  # type: ignore[no-untyped-def]
    """The verdict line names what the GPU layer rests on: each kind of host's cards, folded
    into one node set, and the hosts that read none; a host that sent no gpus part is said
    under "not checked" instead."""
    from envtool.protocol.gpu_types import GpuDevice, GpuLayer

    h100 = GpuDevice(0, "NVIDIA H100 80GB HBM3")
    eight = GpuLayer("nvml", "550.54.15", devices=tuple(replace(h100, index=i) for i in range(8)))
    rs = (*(HostReport(f"gpu{i:02}", facts=FACTS, gpus=eight) for i in range(1, 4)),
          HostReport("login", facts=FACTS, gpus=GpuLayer("none", why="no NVIDIA driver")),
          HostReport("old", facts=FACTS))  # fmt: skip
    report.show(verdict.Verdict(rs, (), "", 1.0), "table", None)
    said = " ".join(capsys.readouterr().out.split())
    assert (
        "GPUs read without torch: 8x NVIDIA H100 80GB HBM3 (driver 550.54.15, nvml) on "
        "gpu[01-03]; none on login;" in said
    )
    segment = said.split("GPUs read without torch: ")[1].split("; all-reduce:")[0]
    assert "old" not in segment  # no gpus part: nothing read there


def test_what_a_node_could_not_read_is_said_beside_all_good() -> None:
    """/dev/shm's size unreadable, a node with GPUs whose Xid log it may not read (dmesg as
    a user under dmesg_restrict): no finding rests on them, and the verdict says so."""
    from envtool.protocol.gpu_types import GpuDevice, GpuLayer, XidLog

    hidden = XidLog(False, "dmesg: read kernel buffer failed: Operation not permitted")
    h100 = GpuDevice(0, "NVIDIA H100 80GB HBM3", ecc_uncorrected_volatile=0,
                     ecc_uncorrected_aggregate=0, remapped_rows_pending=False,
                     pcie_width_current=16)  # fmt: skip
    cards = GpuLayer("nvml", "550.54.15", devices=(h100,), xid=XidLog(True))
    rs = [
        HostReport("a", facts=FACTS, gpus=cards, limits=Limits(None, "No such file")),
        HostReport("b", facts=FACTS, gpus=replace(cards, xid=hidden)),
        HostReport("c", facts=FACTS, gpus=GpuLayer("none", xid=hidden)),  # no GPU: nothing
    ]
    assert unchecked.unread(rs) == (
        "/dev/shm size on a (not readable there: No such file)",
        "Xid log on b (not readable there: dmesg: read kernel buffer failed: Operation not "
        "permitted)",
    )
    assert unchecked.unread(rs[2:]) == ()
    # a card whose every health field reads [N/A] is not checked, never a silent pass (issue
    # 33 item 2); ECC off has no counters to read
    na = (("ecc_uncorrected_volatile", "[N/A]"), ("remapped_rows_pending", "[N/A]"))
    blank = GpuDevice(0, "NVIDIA H100 80GB HBM3", unread=na)
    rs = [HostReport(h, facts=FACTS, gpus=replace(cards, devices=(blank,))) for h in ("a", "b")]
    assert unchecked.unread(rs) == (
        "ECC errors on a, b GPU 0 (not readable there: [N/A])",
        "row remaps or retired pages on a, b GPU 0 (not readable there: [N/A])",
        "PCIe link on a, b GPU 0 (not readable there)",
    )
    no_ecc = replace(blank, ecc_mode=False, pcie_width_current=16, retired_pages_pending=False)
    assert unchecked.unread([HostReport("a", gpus=replace(cards, devices=(no_ecc,)))]) == ()
