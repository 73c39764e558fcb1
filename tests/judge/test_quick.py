"""judge/quick.py: which of a node's GPUs ``preflight --quick`` judges (a job's in its Prolog,
health alone as a health check), and the GPU list as SLURM_JOB_GPUS and CUDA_VISIBLE_DEVICES
write it. The layers are the real H100 capture's values (tests/fixtures/gpu_parts.py) with a
copy of the card as GPU 1 (its own UUID and bus id); each test says what holds or failed."""

from __future__ import annotations

from typing import Any

import pytest
from fixtures.gpu_parts import device, load_processes, no_driver, node_document, part

from envtool.judge import quick
from envtool.judge.cluster_policy import GpuExpect
from envtool.judge.findings import Kind
from envtool.judge.gpu_health import check
from envtool.judge.quick import GpuScope, in_scope, narrowed, parse_gpus
from envtool.protocol.answers import host_report
from envtool.protocol.types import Answer, HostReport
from envtool.report.drain import reason

UUID1 = "GPU-00000000-0000-0000-0000-000000000001"
GPU1 = {"index": 1, "uuid": UUID1, "pci_bus_id": "00000000:41:00.0"}


def _node(processes: list[dict[str, Any]], events: list[dict[str, Any]] | None = None,
          **gpu1: Any) -> HostReport:  # fmt: skip
    layer = part([device(), device(**{**GPU1, **gpu1})], processes, events)
    return host_report(Answer("n1", 0, node_document(layer)))


def _on_gpu1(processes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [dict(p, gpu_uuid=UUID1) for p in processes]


def _judged(report: HostReport, scope: GpuScope) -> list[tuple[Kind, str]]:
    judged, _, found = narrowed(report, scope)
    return [(f.kind, f.subject) for f in found + in_scope(check([judged], GpuExpect(), 1), scope)]


def test_every_gpu_is_judged_unless_a_scope_is_given() -> None:
    report = _node(_on_gpu1(load_processes()))
    judged, coverage, found = narrowed(report, GpuScope())
    assert (judged, found, coverage.judged, coverage.total) == (report, [], 2, 2)
    assert _judged(report, GpuScope()) == [(Kind.GPU_BUSY, "GPU 1")]


def test_a_job_is_judged_on_its_own_gpus_and_the_processes_on_them() -> None:
    report = _node(_on_gpu1(load_processes()))  # another job's processes hold GPU 1
    judged, coverage, _ = narrowed(report, GpuScope(("0",)))
    assert _judged(report, GpuScope(("0",))) == []
    assert judged.gpus is not None and judged.gpus.processes == ()
    assert (coverage.judged, coverage.total) == (1, 2)
    for named in (("1",), (UUID1,), (UUID1.lower(),), ("0", "1")):
        assert _judged(report, GpuScope(named)) == [(Kind.GPU_BUSY, "GPU 1")], named
    judged, _, found = narrowed(report, GpuScope((UUID1,)))
    assert reason(found + check([judged], GpuExpect(), 1)) == "envtool: gpu-busy GPU 1 pid " \
        "11327,11328,11345"  # fmt: skip


def test_a_job_is_judged_on_its_gpus_health_and_their_xid_records_only() -> None:
    ecc = _node([], ecc_uncorrected_volatile=2)  # GPU 1's uncorrectable ECC errors
    assert _judged(ecc, GpuScope(("0",))) == []
    assert _judged(ecc, GpuScope(("1",))) == [(Kind.GPU_ECC, "GPU 1")]
    on_gpu1 = {"xid": 79, "pci": "PCI:0000:41:00", "text": "GPU has fallen off the bus."}
    assert _judged(_node([], [on_gpu1]), GpuScope(("0",))) == []
    assert _judged(_node([], [on_gpu1]), GpuScope(("1",))) == [(Kind.GPU_XID, "GPU 1")]
    # a bus id no GPU of the node has (a card fallen off the bus, no longer listed) may be
    # the job's: it is judged whichever GPUs the job was given
    gone = dict(on_gpu1, pci="PCI:0000:c1:00")
    assert _judged(_node([], [gone]), GpuScope(("0",))) == [(Kind.GPU_XID, "PCI PCI:0000:c1:00")]


def test_a_job_gpu_the_node_did_not_read_is_too_few_gpus() -> None:
    _, coverage, found = narrowed(_node([]), GpuScope(("0", "5")))
    assert [(f.kind, f.expected, f.actual) for f in found] == [
        (Kind.TOO_FEW_GPUS, "the job's GPUs 0,5 (--job-gpus)", "1")  # GPU 5 is not there
    ]
    assert reason(found).startswith("envtool: too-few-gpus")
    assert (coverage.judged, coverage.total) == (1, 2)
    assert narrowed(_node([]), GpuScope(("0", UUID1.replace("1", "7"))))[2] != []
    assert narrowed(_node([]), GpuScope(("0", "1")))[2] == []
    # no driver: the count says not-checked for the job's GPUs, even under --min-gpus 0
    none = host_report(Answer("n1", 0, node_document(no_driver())))
    assert narrowed(none, GpuScope(("0",)))[2] == []
    (said,) = quick.gpu_count(none, 0, ("0",))
    assert (said.kind, said.expected) == (Kind.NOT_CHECKED,
                                          "the GPUs read without torch (--job-gpus 0)")  # fmt: skip
    assert quick.gpu_count(none, 0) == []


def test_a_health_check_judges_health_never_occupancy() -> None:
    health = GpuScope(occupancy=False)
    busy = _node(load_processes() + _on_gpu1(load_processes()))  # both GPUs held
    judged, coverage, found = narrowed(busy, health)
    assert _judged(busy, health) == [] and found == [] and judged == busy
    assert (coverage.judged, coverage.total) == (2, 2)
    # memory held by nobody visible from here (another container's job): occupancy too
    unseen = _node([], memory_used_mib=19818, clock_events=[])
    assert _judged(unseen, GpuScope()) == [(Kind.GPU_BUSY, "GPU 1")]
    assert _judged(unseen, health) == []
    held_and_broken = _node(_on_gpu1(load_processes()), ecc_uncorrected_volatile=2)
    assert _judged(held_and_broken, health) == [(Kind.GPU_ECC, "GPU 1")]
    # a link below its generation is a fault only on a GPU in use: the holders still count
    slow = _node(_on_gpu1(load_processes()), pcie_gen_current=3)
    assert _judged(slow, health) == [(Kind.GPU_PCIE_DEGRADED, "GPU 1")]


@pytest.mark.parametrize(
    ("text", "names"),
    [("0", ("0",)), ("0,1,7", ("0", "1", "7")), (UUID1, (UUID1,)), (f"3,{UUID1}", ("3", UUID1))],
)
def test_the_lists_slurm_and_cuda_write(text: str, names: tuple[str, ...]) -> None:
    assert parse_gpus(text) == names


@pytest.mark.parametrize(
    ("text", "why"),
    [("", "no GPU index"), ("0,", "no GPU index"), ("0-3", "no GPU index"),
     (" 0", "no GPU index"), ("01", "no GPU index"), ("-1", "no GPU index"),
     ("NoDevFiles", "no GPU index"), ("GPU-1234", "no GPU index"),
     ("MIG-00000000-0000-0000-0000-000000000000", "MIG instance"), ("1,1", "named twice"),
     (f"{UUID1},{UUID1.lower()}", "named twice"), (",".join(["0"] * 1025), "more than 1024")],
)  # fmt: skip
def test_anything_else_is_refused_with_why(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_gpus(text)
