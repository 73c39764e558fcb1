"""NCCL's RAS client text (joblog/ras.py) given to ``envtool explain``. The captures are
synthetic, written here from the format strings of NVIDIA/nccl src/ras/client_support.cc
(v2.24.3-1 6aae379 and v2.26.2-1 f44ac75) and the samples of its troubleshooting/ras.rst (a
32-rank job whose process on 172.16.64.213 stopped): the dead process is the failure, named
on its node, ahead of the watchdog timeouts of the ranks that waited for it; a verify report
whose host has that address joins it by the address."""

from __future__ import annotations

from envtool.joblog.scan import FileScan, scan
from envtool.joblog.signs import Sign
from envtool.joblog.stream import RawLine
from envtool.judge import explain, explain_join
from envtool.judge.explain import Status
from envtool.protocol.net_types import Interface, Network
from envtool.protocol.verify_report import FindingEntry, HostEntry, VerifyDocument
from envtool.report import explain_words

HEAD = """\
NCCL version 2.26.2 compiled with CUDA 12.8
CUDA runtime version 12080, driver version 12080

Job summary
===========

  Nodes  Processes         GPUs  Processes     GPUs
(total)   per node  per process    (total)  (total)
      4          8            1         32       32

Communicators... (2.05s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         4       7-8        32        32   RUNNING  INCOMPLETE

Errors
======

"""
V226 = (
    HEAD
    + """\
DEAD
  1 job process is considered dead (unreachable via the RAS network)
  Process 3487984 on node 172.16.64.213 managing GPU 5

#0-0 (cf264af53edbe986) INCOMPLETE
  Missing communicator data from 1 rank
  Rank 21 -- GPU 5 managed by process 3487984 on node 172.16.64.213

Warnings
========

TIMEOUT
  Encountered 2 communication timeouts while gathering communicator data

"""
)
V224 = (
    HEAD
    + """\
INCOMPLETE
  Missing communicator data from 1 job process
  Process 3487984 on node 172.16.64.213 managing GPU 5

#0-0 (cf264af53edbe986) INCOMPLETE
  Missing communicator data from 1 rank
  The missing rank: 21

#0-1 (27a079b828ff1a75) ERROR
  Asynchronous errors on 2 ranks
  2 ranks reported Remote process error
  Rank 3 -- GPU 3 managed by process 4100 on node 172.16.64.210
  Rank 9 -- GPU 1 managed by process 4210 on node 172.16.64.211

Warnings
========

"""
)
WATCHDOG = (
    "172.16.64.210:4100:4190 [3] NCCL INFO comm 0x55 rank 3 nranks 32 - Init COMPLETE\n"
    "[rank3]:[E ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\n"
)


def _scan(name: str, text: str) -> FileScan:
    lines = [RawLine(n, t, len(t), False) for n, t in enumerate(text.splitlines(), 1)]
    return scan(name, lines)


def _said(text: str) -> list[tuple[Sign, str | None, str | None]]:
    return [(e.sign, e.origin.host, e.get("pid")) for e in _scan("ras.txt", text).events]


def test_226_names_the_dead_process_and_the_missing_rank_on_its_node() -> None:
    assert _said(V226) == [
        (Sign.RAS_DEAD, "172.16.64.213", "3487984"),
        (Sign.RAS_MISSING, "172.16.64.213", "3487984"),
    ]
    rank = _scan("ras.txt", V226).events[1]
    assert rank.origin.rank == 21 and rank.get("comm") == "cf264af53edbe986"


def test_224_lists_the_missing_rank_without_a_node_and_the_errors_with_theirs() -> None:
    events = _scan("ras.txt", V224).events
    assert [(e.sign, e.origin.host, e.origin.rank) for e in events] == [
        (Sign.RAS_MISSING, "172.16.64.213", None),
        (Sign.RAS_MISSING, None, None),  # "The missing rank: 21": RAS names no node
        (Sign.RAS_ERROR, "172.16.64.210", 3),
        (Sign.RAS_ERROR, "172.16.64.211", 9),
    ]
    assert events[1].get("ranks") == "21"
    assert explain_words.what(events[2]) == (
        "NCCL RAS: rank 3 (process 4100 on node 172.16.64.210, GPU 3) reported Remote process error"
    )


def test_the_dead_process_leads_the_watchdog_timeouts_it_caused() -> None:
    verdict = explain.decide([_scan("job.log", WATCHDOG), _scan("ras.txt", V226)])
    assert verdict.status is Status.NOT_ESTABLISHED
    lead = verdict.findings[0]
    assert (lead.lead.sign, lead.finding.hosts) == (Sign.RAS_DEAD, ("172.16.64.213",))
    assert explain_words.what(lead.lead) == (
        "NCCL RAS: process 3487984 on node 172.16.64.213, GPU 5 is considered dead (unreachable)"
    )
    assert "kernel log" in explain_words.needs(lead.lead.sign)[0]


def _report(finding: FindingEntry) -> VerifyDocument:
    def host(name: str, address: str) -> HostEntry:
        eth = Interface("ib0", True, addresses=(f"{address}/16",), mtu=2044, speed_mbps=200_000)
        return HostEntry(name, True, None, 1.0, (), 10, None, None, network=Network((eth,)))

    hosts = (host("gpu12", "172.16.64.213"), host("gpu10", "172.16.64.210"))
    return VerifyDocument(None, 2.0, False, hosts, (finding,))


def test_the_dead_processes_node_is_joined_by_its_address() -> None:
    verdict = explain.decide([_scan("job.log", WATCHDOG), _scan("ras.txt", V226)])
    xid = FindingEntry("gpu-xid", "error", "GPU 5", "none", "Xid 79", "", ("gpu12",))
    joined_verdict, joined = explain_join.join(verdict, [("v.json", _report(xid))], [])
    assert joined_verdict.status is Status.CAUSE
    assert [(j.role, j.finding.kind, j.finding.hosts) for j in joined] == [
        ("cause", "gpu-xid", ("gpu12",))
    ]
    other = FindingEntry("gpu-xid", "error", "GPU 0", "none", "Xid 79", "", ("gpu10",))
    _, joined = explain_join.join(verdict, [("v.json", _report(other))], [])
    assert all(j.role != "cause" for j in joined)  # gpu10's Xid is not the dead process's
