"""protocol/verify_report.py: what is written reads back equal, and docs/report-schema.md
describes exactly these fields."""

from __future__ import annotations

import json
import re
from dataclasses import fields, replace

import pytest
from conftest import REPO

from envtool.errors import InputError
from envtool.judge import gpu, verdict
from envtool.models import Environment, Package
from envtool.nccl.model import NcclResult, NcclRow
from envtool.protocol import schemas
from envtool.protocol import verify_report as vr
from envtool.protocol.gpu_types import GpuDevice, GpuLayer, GpuProcess, NvLink, XidEvent, XidLog
from envtool.protocol.limit_types import Limits
from envtool.protocol.net_types import IbPort, IfSelection, Infiniband, Interface, Network
from envtool.protocol.rdzv_types import Listen, Reach, RendezvousCheck
from envtool.protocol.types import (
    AllReduceResult,
    Device,
    Failure,
    HostReport,
    NodeFacts,
    Outcome,
    Problem,
    ProblemKind,
)
from envtool.report import verify as report

DOC = REPO / "docs" / "report-schema.md"


UUID = "GPU-00000000-0000-0000-0000-000000000000"
GPUS = GpuLayer(
    "nvidia-smi", "590.48.01", None, 0.12,
    (GpuDevice(0, "NVIDIA H100 80GB HBM3", UUID, "00000000:00:09.0", 81559, 19818, "9.0",
               ecc_mode=True, ecc_uncorrected_volatile=2, pcie_width_current=8,
               pcie_width_max=16, clock_events=("hw_slowdown",), nvlinks=(NvLink(0, False),),
               unread=(("retired_pages_pending", "[N/A]"),)),),
    (GpuProcess(UUID, 11327, "/root/tools/memhog", "alice", 2566),
     GpuProcess(UUID, 11345, "./gpu_burn", None, None)),
    XidLog(True, None, (XidEvent(79, "0000:00:09", "NVRM: Xid (PCI:0000:00:09): 79", 12.5),)),
)  # fmt: skip

NETWORK = Network(
    (Interface("lo", True, True, ("127.0.0.1/8",), 65536),
     Interface("eth0", True, False, ("10.77.20.11/24", "fd00::11/64"), 1500, 10000)),
    IfSelection("NCCL_SOCKET_IFNAME", "eth9", (), "variable"),
    IfSelection("GLOO_SOCKET_IFNAME", None, ("eth0",), "hostname"),
    Infiniband(True, (IbPort("mlx5_0", 1, "ACTIVE", "LinkUp", 200.0, "200 Gb/sec (4X HDR)",
                             "InfiniBand"),), "mlx5_4", ("mlx5_4",), False),
    4026531840,
)  # fmt: skip
LIMITS = Limits(67108864, "", (1024, 1048576), (65536, -1), "6.1.0-18-amd64", "2.36")
RDZV = RendezvousCheck(
    "gpu01", 29400, "host", ("10.77.20.11",), "",
    Reach(False, "timed out after 3 s", 3.0, "10.77.20.11", (1.8e9 + 1, 1.8e9 + 4)),
    Listen(True, "", ("gpu01",), open=(1.8e9, 1.8e9 + 10)), 3,
)  # fmt: skip
PARTS: dict[str, Network | Limits | RendezvousCheck] = {
    "network": NETWORK,
    "limits": LIMITS,
    "rendezvous": RDZV,
}


def _verdict() -> verdict.Verdict:
    part = NcclResult(613.3, 218.85, 382.99, 0)
    ar = AllReduceResult("nccl", 8, (NcclRow(134217728, 33554432, "float", "sum", -1, part, part),))
    facts = NodeFacts(
        "gpu01", "3.9.18", "2.1.0", "11.8", True, 1, (Device(0, "NVIDIA H100 80GB HBM3"),),
        "535.104.05", "8902", "2.18.3", "2.36", (("NCCL_SOCKET_IFNAME", "ib0"),), ("a note",),
    )  # fmt: skip
    env = Environment("gpu01", "probe", (Package("pytorch", "2.1.0", "cpu_0"),))
    lock = Environment("lock", "lock", (Package("pytorch", "2.1.0", "cuda118_0"),))
    reports = (
        HostReport(
            "gpu01",
            env=env,
            facts=facts,
            allreduce=ar,
            seconds=0.4129,
            gpus=GPUS,
            network=NETWORK,
            limits=LIMITS,
            rendezvous=RDZV,
            clock_offset=(-0.0123, 0.004),
        ),
        HostReport("gpu02", Failure(Outcome.TIMED_OUT_ON_NODE, "Terminated", 124), seconds=9.0),
        HostReport("gpu03", problems=(Problem("facts", ProblemKind.MALFORMED, "'devices'"),)),
    )
    policy = verdict.Policy(gpu.GpuPolicy(min_gpus=1))
    found = tuple(verdict.decide(list(reports), lock, policy))
    return verdict.Verdict(reports, found, "conda-lock.yml", 2.5, unchecked=("rendezvous port",))


def test_a_report_reads_back_equal() -> None:
    doc = report.document(_verdict())
    assert doc.hosts[0].allreduce is not None and doc.hosts[0].allreduce.peak_busbw == 382.99
    assert doc.hosts[0].gpus == GPUS and doc.hosts[1].gpus is None  # the GPU layer as read
    assert vr.loads(vr.dumps(doc), "r.json") == doc
    assert json.loads(vr.dumps(doc))["schema"] == schemas.VERIFY


def test_the_gpu_layer_is_written_in_its_own_shape_and_old_reports_still_read() -> None:
    body = json.loads(vr.dumps(report.document(_verdict())))
    gpus = body["hosts"][0]["gpus"]
    assert gpus["schema"] == "envtool.gpus/1" and gpus["devices"][0]["unread"] == {
        "retired_pages_pending": "[N/A]"
    }
    assert [p["pid"] for p in gpus["processes"]] == [11327, 11345]
    for host in body["hosts"]:  # a report from before the GPU layer
        del host["gpus"]
    assert [h.gpus for h in vr.loads(json.dumps(body), "old.json").hosts] == [None] * 3
    body["hosts"][0]["gpus"] = {**gpus, "source": "guess"}
    with pytest.raises(InputError, match=r"old\.json: .*'gpus': 'source' must be one of"):
        vr.loads(json.dumps(body), "old.json")


def test_the_network_limits_rendezvous_and_clock_read_back_in_their_own_shapes() -> None:
    doc = report.document(_verdict())
    first, second = doc.hosts[0], doc.hosts[1]
    assert (first.network, first.limits, first.rendezvous) == (NETWORK, LIMITS, RDZV)
    assert first.clock_offset == (-0.012, 0.004) and second.clock_offset is None
    assert (second.network, second.limits, second.rendezvous) == (None, None, None)
    assert vr.loads(vr.dumps(doc), "r.json") == doc
    body = json.loads(vr.dumps(doc))
    host = body["hosts"][0]
    assert [host[k]["schema"] for k in PARTS] == [
        "envtool.network/1",
        "envtool.limits/1",
        "envtool.rendezvous/1",
    ]
    assert host["limits"]["memlock"] == [65536, -1] and host["clock_offset"] == [-0.012, 0.004]
    assert body["unchecked"] == ["rendezvous port"]


def test_a_report_from_before_the_network_parts_still_reads() -> None:
    body = json.loads(vr.dumps(report.document(_verdict())))
    del body["unchecked"]
    for host in body["hosts"]:
        for key in (*PARTS, "clock_offset"):
            del host[key]
    doc = vr.loads(json.dumps(body), "old.json")
    assert doc.unchecked == ()
    assert {(h.network, h.limits, h.rendezvous, h.clock_offset) for h in doc.hosts} == {
        (None, None, None, None)
    }
    assert doc.hosts[0].gpus == GPUS  # what it had still reads


@pytest.mark.parametrize(
    ("key", "bad", "says"),
    [
        ("network", {"schema": "envtool.network/2", "interfaces": []}, "not an envtool.network/1"),
        (
            "network",
            {"schema": "envtool.network/1", "interfaces": [{"name": "eth0", "up": 1}]},
            "'up' must be true or false",
        ),
        (
            "limits",
            {"schema": "envtool.limits/1", "nofile": [1], "memlock": [1, 1]},
            "'nofile' must be \\[soft, hard\\]",
        ),
        (
            "rendezvous",
            {"schema": "envtool.rendezvous/1", "role": "boss", "port": 1},
            "'role' must be host or peer",
        ),
        ("clock_offset", [1.0], "'clock_offset' must be"),
        ("clock_offset", [1.0, -2.0], "'clock_offset' must be"),
        ("limits", "64M", "the limits must be an object"),
    ],
)
def test_a_malformed_part_is_refused_with_the_file_named(key: str, bad: object, says: str) -> None:
    body = json.loads(vr.dumps(report.document(_verdict())))
    body["hosts"][0][key] = bad
    with pytest.raises(
        InputError, match=rf"^bad\.json: not an envtool verify JSON report: .*{says}"
    ):
        vr.loads(json.dumps(body), "bad.json")


def test_a_hostile_interface_name_and_kernel_are_made_visible() -> None:
    hostile = "eth0\x1b]0;owned\x07\u202e"
    nccl = IfSelection("NCCL_SOCKET_IFNAME", hostile, (hostile,), "variable")
    net = replace(NETWORK, interfaces=(replace(NETWORK.interfaces[1], name=hostile),), nccl=nccl)
    limits = replace(LIMITS, kernel="6.1\r\x1b[2J")
    rdzv = replace(RDZV, error="no\nname")
    entry = report.host_entry(HostReport("gpu01", network=net, limits=limits, rendezvous=rdzv))
    assert entry.network is not None and entry.network.nccl is not None
    shown = "eth0\\x1b]0;owned\\x07\\u202e"
    assert entry.network.interfaces[0].name == shown and entry.network.nccl.selected == (shown,)
    assert entry.network.nccl.value == shown
    assert entry.limits is not None and entry.limits.kernel == "6.1\\x0d\\x1b[2J"
    assert entry.rendezvous is not None and entry.rendezvous.error == "no\\x0aname"
    text = vr.dumps(replace(report.document(_verdict()), hosts=(entry,)))
    assert "\x1b" not in text and "\u202e" not in text


def test_a_gpu_process_name_is_made_visible() -> None:
    shown = replace(GPUS, processes=(replace(GPUS.processes[0], name="hog\x1b[31m"),))
    gpus = report.host_entry(HostReport("gpu01", gpus=shown)).gpus
    assert gpus is not None and gpus.processes[0].name == "hog\\x1b[31m"


@pytest.mark.parametrize(
    "text",
    [
        "{}",
        '{"schema": "envtool.verify/1"}',
        '{"schema": "envtool.verify/2", "hosts": [], "findings": []}',
        "[1, 2]",
        "not json",
    ],
)
def test_anything_else_is_rejected_with_the_file_named(text: str) -> None:
    with pytest.raises(InputError, match=r"^r\.json: not an envtool verify JSON report"):
        vr.loads(text, "r.json")


def _documented_example() -> dict[str, object]:
    page = DOC.read_text()
    block = page.split("## `envtool.verify/1`", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    without_comments = re.sub(r"\s*//[^\n]*", "", block)
    doc: dict[str, object] = json.loads(without_comments)
    return doc


def test_the_documented_report_is_one_this_reader_accepts() -> None:
    example = _documented_example()
    doc = vr.loads(json.dumps(example), "docs/report-schema.md")
    assert json.loads(vr.dumps(doc)) == example  # no field documented that the writer lacks


def test_the_documented_fields_are_the_dataclasses_fields() -> None:
    example = _documented_example()
    host = example["hosts"][0]  # type: ignore[index]
    assert set(example) == {"schema"} | {f.name for f in fields(vr.VerifyDocument)}
    assert set(host) == {f.name for f in fields(vr.HostEntry)}
    assert set(host["facts"]) == {f.name for f in fields(vr.FactsEntry)}
    assert set(host["allreduce"]) == {f.name for f in fields(vr.AllReduceEntry)}
    assert set(host["gpus"]) == {"schema"} | {f.name for f in fields(GpuLayer)}
    assert set(host["gpus"]["devices"][0]) == {f.name for f in fields(GpuDevice)}
    assert set(host["gpus"]["processes"][0]) == {f.name for f in fields(GpuProcess)}
    for key, part in PARTS.items():
        assert set(host[key]) == {"schema"} | {f.name for f in fields(part)}, key
    assert set(host["network"]["interfaces"][0]) == {f.name for f in fields(Interface)}
    assert set(host["network"]["nccl"]) == {f.name for f in fields(IfSelection)}
    assert set(host["network"]["ib"]) == {f.name for f in fields(Infiniband)}
    assert set(host["rendezvous"]["reach"]) == {f.name for f in fields(Reach)}
    assert set(example["findings"][0]) == {f.name for f in fields(vr.FindingEntry)}  # type: ignore[index]


def test_every_schema_id_is_documented() -> None:
    page = DOC.read_text()
    for schema in schemas.ALL:
        assert f"`{schema}`" in page, schema
