"""protocol/net_fields.py: the ``network`` part read strictly into net_types (a malformed one
is that node's problem, never a crash); a document the node package really made (this
machine's interfaces, the recorded IB tree) reads back as it was written."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from fixtures import ttar

from envtool.protocol.answers import host_report
from envtool.protocol.types import Answer, ProblemKind
from envtool_node import infiniband, network


def _answer(part: Any) -> Answer:
    doc = {"schema": "envtool.node/1", "node": "n1", "prefix": "/p",
           "facts": {"schema": "envtool.gpu-facts/1"}, "network": part}  # fmt: skip
    return Answer("n1", 0, json.dumps(doc), "", 1.0)


def test_the_node_packages_own_document_reads_back(tmp_path: Path) -> None:
    part = network.collect({**os.environ, "NCCL_SOCKET_IFNAME": "=lo", "NCCL_IB_HCA": "mlx5_9"})
    archive = REPO / "tests" / "fixtures" / "data" / "node_exporter-infiniband.ttar"
    root = ttar.extract(archive, tmp_path) / "sys" / "class" / "infiniband"
    part["ib"] = infiniband.read(str(root), {"NCCL_IB_HCA": "mlx5_9"}, str(tmp_path), "/none")
    report = host_report(_answer(part))
    assert report.problems == () and report.network is not None
    net = report.network
    assert [i.name for i in net.interfaces] == [i["name"] for i in part["interfaces"]]
    lo = net.interface("lo")
    assert lo is not None and lo.loopback and "127.0.0.1/8" in lo.addresses
    assert net.nccl is not None and (net.nccl.value, net.nccl.selected) == ("=lo", ("lo",))
    assert net.gloo is not None and net.gloo.how == "hostname"
    assert net.netns == os.stat("/proc/self/ns/net").st_ino  # this process's namespace
    assert net.ib is not None and net.ib.present and net.ib.hca_missing == ("mlx5_9",)
    assert [(p.name, p.up, p.rate_gbps) for p in net.ib.ports] == [
        ("i40iw0:1", True, 10.0),
        ("mlx4_0:1", True, 40.0),
        ("mlx4_0:2", True, 40.0),
    ]


@pytest.mark.parametrize(
    ("state", "phys", "read_as", "up"),
    [
        ("4", "5", ("ACTIVE", "LinkUp"), True),
        ("Active", "LinkUp", ("ACTIVE", "LinkUp"), True),
        ("ACTIVE", "ACTIVE", ("ACTIVE", "ACTIVE"), True),  # procfs's recorded mlx5_0
        ("1", "3", ("DOWN", "Disabled"), False),
        ("DOWN", "DISABLED", ("DOWN", "Disabled"), False),
    ],
)
def test_an_older_nodes_words_are_read_as_the_kernels(
    state: str, phys: str, read_as: tuple[str, str], up: bool
) -> None:
    """An older node package sent what followed the colon, else the file as it was: a tree
    that writes bare numbers or words came as "4" or "Active"; they read as the kernel's."""
    port = {"device": "mlx4_0", "port": 1, "state": state, "phys_state": phys}
    report = host_report(_answer({**GOOD, "ib": {"present": True, "ports": [port]}}))
    assert report.network is not None and report.network.ib is not None
    [read] = report.network.ib.ports
    assert ((read.state, read.phys_state), read.up, read.disabled) == (read_as, up, not up)


def test_an_older_node_without_the_part() -> None:
    answer = Answer("n1", 0, json.dumps({"schema": "envtool.node/1", "node": "n1",
                                         "facts": {"schema": "envtool.gpu-facts/1"}}))  # fmt: skip
    report = host_report(answer)
    assert report.network is None and report.problems == ()


GOOD = {"schema": "envtool.network/1", "interfaces": [], "nccl": None, "gloo": None, "ib": None}


@pytest.mark.parametrize(
    ("part", "says"),
    [
        ({**GOOD, "schema": "envtool.network/9"}, "not an envtool.network/1"),
        ({**GOOD, "interfaces": {"eth0": 1}}, "interfaces must be a list"),
        ({**GOOD, "interfaces": [{"name": "eth0", "up": "yes"}]}, "'up' must be true or false"),
        ({**GOOD, "interfaces": [{"name": "e", "up": True, "mtu": -5}]}, "'mtu' must not be"),
        ({**GOOD, "interfaces": [{"name": "e", "up": True, "addresses": [1]}]}, "strings"),
        ({**GOOD, "nccl": {"variable": "V", "selected": [], "how": "guess"}}, "'how' must be"),
        (
            {
                **GOOD,
                "ib": {
                    "present": True,
                    "ports": [{"device": "m", "port": 1, "rate_gbps": float("inf")}],
                },
            },
            "rate_gbps",
        ),
        ({**GOOD, "netns": True}, "'netns' must be"),
        ({**GOOD, "netns": -1}, "'netns' must be"),
        ({**GOOD, "netns": 2**70}, "'netns' must be"),
    ],
)
def test_malformed_parts_are_that_nodes_problem(part: dict[str, Any], says: str) -> None:
    report = host_report(_answer(part))
    assert report.network is None
    [problem] = report.problems
    assert (problem.part, problem.kind) == ("network", ProblemKind.MALFORMED)
    assert says in problem.detail


def test_a_part_that_failed_on_the_node() -> None:
    report = host_report(_answer({"error": "OSError: no /sys", "kind": "failed"}))
    assert [(p.part, p.kind, p.detail) for p in report.problems] == [
        ("network", ProblemKind.FAILED, "OSError: no /sys")
    ]
