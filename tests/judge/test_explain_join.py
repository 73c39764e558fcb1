"""The logs joined with the nodes' verify reports (judge/explain_join.py): an IB completion
error's peer is found by its address among the report's interfaces, and a port down there is
the deeper cause; a host the logs do not name is never joined. The log lines are NCCL's own
format (net_ib.cc), synthetic; the report is made of verify's own dataclasses, as
``verify --format json`` reads back."""

from __future__ import annotations

from envtool.joblog.scan import scan
from envtool.joblog.stream import RawLine
from envtool.judge import explain, explain_join
from envtool.judge.explain import Status
from envtool.protocol.net_types import Interface, Network
from envtool.protocol.verify_report import FindingEntry, HostEntry, VerifyDocument

LOG = (
    "node2:55:60 [1] NCCL INFO NET/IB : Using [0]mlx5_1:1/IB ; OOB eth0:10.0.0.2<0>",
    "node2:55:60 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
    "10.0.0.3<43594> with status=12 opcode=0 len=0 vendor err 129 (Recv)",
)


def _host(name: str, address: str) -> HostEntry:
    eth = Interface("eth0", True, addresses=(f"{address}/24",), mtu=1500, speed_mbps=100_000)
    return HostEntry(name, True, None, 1.0, (), 10, None, None, network=Network((eth,)))


def _report(*findings: FindingEntry) -> VerifyDocument:
    hosts = tuple(_host(f"node{i}", f"10.0.0.{i}") for i in (1, 2, 3))
    return VerifyDocument(None, 2.0, False, hosts, findings)


def _port_down(host: str) -> FindingEntry:
    return FindingEntry("ib-port-down", "error", "mlx5_1 port 1", "Active", "Down", "", (host,))


def _verdict() -> explain.JobVerdict:
    lines = [RawLine(n, t, len(t), False) for n, t in enumerate(LOG, 1)]
    return explain.decide([scan("job.log", lines)])


def test_the_peers_port_down_is_the_deeper_cause() -> None:
    verdict = _verdict()
    assert verdict.findings[0].finding.kind.value == "ib-completion-error"
    report = _report(_port_down("node3"))
    assert explain_join.peer_hosts(verdict.findings[0], [("v.json", report)]) == {"node3"}
    joined_verdict, joined = explain_join.join(verdict, [("v.json", report)], ["node2"])
    assert joined_verdict.status is Status.CAUSE
    assert [(j.role, j.finding.kind, j.finding.hosts) for j in joined] == [
        ("cause", "ib-port-down", ("node3",))
    ]


def test_a_host_neither_the_log_nor_the_peer_names_is_not_joined() -> None:
    verdict = _verdict()
    _, joined = explain_join.join(verdict, [("v.json", _report(_port_down("node1")))], ["node2"])
    assert joined == ()
