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
        HostReport("gpu01", env=env, facts=facts, allreduce=ar, seconds=0.4129, gpus=GPUS),
        HostReport("gpu02", Failure(Outcome.TIMED_OUT_ON_NODE, "Terminated", 124), seconds=9.0),
        HostReport("gpu03", problems=(Problem("facts", ProblemKind.MALFORMED, "'devices'"),)),
    )
    policy = verdict.Policy(gpu.GpuPolicy(min_gpus=1))
    found = tuple(verdict.decide(list(reports), lock, policy))
    return verdict.Verdict(reports, found, "conda-lock.yml", 2.5)


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
    assert set(example["findings"][0]) == {f.name for f in fields(vr.FindingEntry)}  # type: ignore[index]


def test_every_schema_id_is_documented() -> None:
    page = DOC.read_text()
    for schema in schemas.ALL:
        assert f"`{schema}`" in page, schema
