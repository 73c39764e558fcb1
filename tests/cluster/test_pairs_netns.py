"""``verify --allreduce pairs`` (and ``bisect``) names the rate-limited node, and ``pairs`` the
rate-limited link beside a hung pair, among three or four sshd nodes that each have their own
network namespace, hostname and /etc/hosts, joined by a bridge (tests/fixtures/netns.py);
gloo on CPU, torchrun's c10d rendezvous per pair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Project, require
from fixtures import netns

# own namespaces; judged by timing: no CPU-heavy module beside it (fixtures/cpu.py)
pytestmark = pytest.mark.usefixtures("default_rendezvous_port", "cpu_shared")
RATE = "50mbit"  # a veth pair here carries gloo at ~0.2-0.4 GB/s; this is ~0.006: at 200mbit
# (~0.025, 8-16x) a fast pair starved of CPU by a busy CI runner once fell within 3x of it
ARGS = "-b 256K -e 2M -f 2 -n 2 -w 1 --backend gloo"  # on a GPU machine too: every "node" is
# this machine, and NCCL refuses two ranks on one GPU; the veth rate limits are gloo's path


@pytest.fixture
def prefix(runtime_prefix: Path) -> Path:
    require(netns.available(), "needs root, iproute2 (ip, tc), unshare and sshd")
    return runtime_prefix


def _pairs(
    project: Project, lab: netns.Lab, mode: str = "pairs", timeout: int = 120, nodes: int = 4
) -> dict[str, object]:
    code, out, err = project.run(
        "verify", "--hosts", f"node[1-{nodes}]", "-F", str(lab.cluster.ssh_config),
        "--min-gpus", "0",
        "--allreduce", mode, "--allreduce-args", ARGS, "--timeout", str(timeout),
        "--format", "json",
    )  # fmt: skip
    assert code == 1, out + err
    doc: dict[str, object] = json.loads(out)
    return doc


def _errors(doc: dict[str, object]) -> list[tuple[str, str, list[str]]]:
    findings = doc["findings"]
    assert isinstance(findings, list)
    return [(f["kind"], f["subject"], f["hosts"]) for f in findings if f["severity"] == "error"]


def _figures(doc: dict[str, object]) -> list[tuple[str, str, object, object]]:
    """Each pair's two ends' figures: what a failing assertion shows."""
    pairs = doc["pairs"]
    assert isinstance(pairs, list)
    return [(p["a"], p["b"], p["busbw"], p["partner_busbw"]) for p in pairs]


def test_the_rate_limited_node_is_named(prefix: Path, project: Project, tmp_path: Path) -> None:
    """Three nodes (a pair a round, each node met once by the others; four nodes cost the
    CI twice the time for the same verdict): node3's two pairs slow, node1 <-> node2 fast."""
    with netns.lab(tmp_path / "lab", 3, {"CONDA_PREFIX": str(prefix)}) as lab:
        lab.limit_node(3, RATE)
        doc = _pairs(project, lab, nodes=3)
    assert _errors(doc) == [("slow-node", "node3", ["node3"])], _figures(doc)
    assert doc["rounds"] == 3 and isinstance(doc["pairs"], list) and len(doc["pairs"]) == 3
    by_pair = {(p["a"], p["b"]): p["busbw"] for p in doc["pairs"]}
    slow = [v for k, v in by_pair.items() if "node3" in k]
    fast = [v for k, v in by_pair.items() if "node3" not in k]
    assert max(slow) * 3 < min(fast)  # the figures the finding rests on
    # both ends of each pair report their own figure of the run, and honest ends agree
    # (judge/pairs: a pair's figure is the lower end's; issue 33 item 3)
    for pair in doc["pairs"]:
        assert pair["partner_busbw"] is not None, pair
        assert 0.5 < pair["partner_busbw"] / pair["busbw"] < 2.0, pair


def test_bisect_names_the_node_in_two_rounds(
    prefix: Path, project: Project, tmp_path: Path
) -> None:
    """node2 and node3 meet in the first round (node1-node4 the other pair); each then meets
    a node of the fast pair, and only node3's second pair is slow."""
    with netns.lab(tmp_path / "lab", 4, {"CONDA_PREFIX": str(prefix)}) as lab:
        lab.limit_node(3, RATE)
        doc = _pairs(project, lab, "bisect")
    assert _errors(doc) == [("slow-node", "node3", ["node3"])], _figures(doc)
    assert doc["rounds"] == 2 and isinstance(doc["pairs"], list) and len(doc["pairs"]) == 4
    assert {(p["a"], p["b"]) for p in doc["pairs"] if p["round"] == 1} == {
        ("node1", "node4"), ("node2", "node3"),
    }  # fmt: skip


def test_a_hung_pair_costs_its_round_and_the_slow_link_is_named_not_a_node(
    prefix: Path, project: Project, tmp_path: Path
) -> None:
    """node1 and node2 cannot reach each other (every packet between them dropped), and the
    link between node3 and node4 is rate-limited (one lab, so the CI pays one verify for
    both): the hung pair fails at the deadline and follows from the rendezvous finding that
    names the link; every other pair is still measured, the run goes on through all its
    rounds, and node3 <-> node4, measured again alone, is named as a link, not a node."""
    timeout = 40  # the rate-limited pair needs it: at 30 s a CI run failed it (allreduce-failed)
    with netns.lab(tmp_path / "lab", 4, {"CONDA_PREFIX": str(prefix)}) as lab:
        lab.cut_link(1, 2)
        lab.limit_link(3, 4, RATE)
        doc = _pairs(project, lab, timeout=timeout)
    # the survey's rendezvous check (reach.py) already finds node2 cut off from node1's port:
    # the pair node1 <-> node2 fails on that same link, and is no second finding
    assert sorted(_errors(doc)) == [
        ("rendezvous-unreachable", "node1:29400", ["node2"]),
        ("slow-link", "node3 <-> node4", ["node3", "node4"]),
    ], _figures(doc)
    findings = doc["findings"]
    assert isinstance(findings, list)
    (cut,) = [f for f in findings if f["kind"] == "rendezvous-unreachable"]
    assert cut["follows"] == 1
    pairs = doc["pairs"]
    assert isinstance(pairs, list) and doc["rounds"] == 4  # the slow link again, alone
    hung = [p for p in pairs if (p["a"], p["b"]) == ("node1", "node2")]
    assert len(hung) == 1 and hung[0]["busbw"] is None and hung[0]["error"]
    assert hung[0]["seconds"] < timeout + 30  # its deadline, not more
    assert all(p["busbw"] for p in pairs if p is not hung[0])  # the others measured
    # issue 34 item 4: a job on these nodes whose node2 rank could not reach node1's port
    # (the log synthetic, the report this lab's real one): the log alone does not establish
    # why; joined with the report, the cut rendezvous path is named, on node2
    report = tmp_path / "verify.json"
    report.write_text(json.dumps(doc))
    log = tmp_path / "job.log"
    log.write_text(
        "node2: [rank1]: node2:4100:4100 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"
        "node2: [rank1]: node2:4100:4100 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: "
        "Connect to 10.0.0.1<29400> failed : Connection timed out\n"
    )
    code, out, err = project.run("explain", str(log), "--report", str(report))
    assert code == 1, out + err
    assert out.startswith("cause: rendezvous-unreachable on node2 (from verify.json)"), out
