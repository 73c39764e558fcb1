"""The network under the environment (issue 28 items 1, 2) on three sshd nodes that each have
their own network namespace, hostname and /etc/hosts (tests/fixtures/netns.py): healthy nodes
say nothing about their network; NCCL_SOCKET_IFNAME=eth9 in every node's sessions is one
finding naming the variable, eth9 and what the nodes have (eth0, lo) on all three; an MTU
changed on one node's veth names that node. A real failed job's "No route to host" joined with
the eth9 lab's report is explained by it (issue 34)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import RuntimeLab as Rig
from conftest import runtime_lab

from envtool.judge.findings import Kind
from envtool.judge.rules_network import NETWORK_RULES

MINE = {k.value for k in NETWORK_RULES if not k.value.startswith("rendezvous-")}
LAB_ENV = {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0"}  # netns.lab's own


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, python_channel: Path) -> Iterator[Rig]:
    """One lab for the module: three nodes whose sessions find a prefix with this torch."""
    with runtime_lab(tmp_path_factory.mktemp("network"), python_channel) as rig:
        yield rig


def _verify(rig: Rig) -> tuple[int, list[dict[str, object]]]:
    code, out, err = rig.project.run(
        "verify", "--hosts", "node[1-3]", "-F", str(rig.lab.cluster.ssh_config),
        "--min-gpus", "0", "--format", "json", "--timeout", "60",
    )  # fmt: skip
    assert out, err
    findings = json.loads(out)["findings"]
    assert isinstance(findings, list)
    return code, findings


def _network(findings: list[dict[str, object]]) -> list[dict[str, object]]:
    return [f for f in findings if f["kind"] in MINE]


def test_healthy_nodes_say_nothing_about_their_network(rig: Rig) -> None:
    code, findings = _verify(rig)
    assert _network(findings) == []
    assert code == 0, findings


def test_an_interface_variable_that_selects_nothing_on_every_node(rig: Rig) -> None:
    rig.lab.set_env({"NCCL_SOCKET_IFNAME": "eth9"})
    try:
        code, findings = _verify(rig)
    finally:
        rig.lab.set_env(LAB_ENV)
    [f] = _network(findings)
    assert (f["kind"], f["severity"], f["subject"]) == (
        Kind.IFNAME_UNMATCHED.value,
        "error",
        "NCCL_SOCKET_IFNAME",
    )
    assert f["hosts"] == ["node1", "node2", "node3"]
    assert "eth9" in str(f["expected"])
    assert " ".join(str(f["actual"]).split()) == "the node has lo, eth0"  # up, with an address
    assert code == 1


def test_an_mtu_changed_on_one_nodes_veth_names_that_node(rig: Rig) -> None:
    ns = rig.lab.ns(2)
    subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "mtu", "1400"], check=True)
    try:
        code, findings = _verify(rig)
    finally:
        subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "mtu", "1500"], check=True)
    assert [(f["kind"], f["subject"], f["hosts"], f["expected"], f["actual"])
            for f in _network(findings)] == [
        (Kind.MTU_DIFFERS.value, "MTU of eth0", ["node2"], "1500", "1400")
    ]  # fmt: skip
    assert code == 0  # a warning


def test_a_real_jobs_no_route_is_explained_by_the_labs_unmatched_interface(
    rig: Rig, shared_data: Path
) -> None:
    """Issue 34: a real job's log (failed-jobs/hkproj1-ifname-no-route-to-host.log, from
    hkproj/pytorch-transformer-distributed#1: NCCL's connect to its peer had no route; the
    thread's fix was NCCL_SOCKET_IFNAME) establishes no cause alone; joined with the verify
    report of this lab, whose NCCL_SOCKET_IFNAME=eth9 selects nothing, the unmatched
    variable is named as the cause, as the report's (the log names no host)."""
    log = shared_data / "real" / "failed-jobs" / "hkproj1-ifname-no-route-to-host.log"
    rig.lab.set_env({"NCCL_SOCKET_IFNAME": "eth9"})
    try:
        _, out, err = rig.project.run(
            "verify", "--hosts", "node[1-3]", "-F", str(rig.lab.cluster.ssh_config),
            "--min-gpus", "0", "--format", "json", "--timeout", "60",
        )  # fmt: skip
    finally:
        rig.lab.set_env(LAB_ENV)
    report = rig.root / "verify-eth9.json"
    report.write_text(out)
    assert rig.project.run("explain", str(log))[0] == 4
    code, out, err = rig.project.run("explain", str(log), "--report", str(report), "--format",
                                     "json")  # fmt: skip
    doc = json.loads(out)
    assert code == 1 and doc["status"] == "cause", out + err
    [cause] = [j for j in doc["joined"] if j["role"] == "cause"]
    assert (cause["finding"]["kind"], cause["finding"]["hosts"], cause["unattributed"]) == (
        "socket-ifname-unmatched", ["node1", "node2", "node3"], True
    )  # fmt: skip
    assert doc["verdict"].startswith("cause: socket-ifname-unmatched on node1, node2, node3")
