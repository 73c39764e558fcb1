"""protocol/gpu_fields.py: the ``gpus`` part read strictly; a malformed one is that node's
problem (part ``gpus``, malformed), never a crash, and the rest of its answer still counts."""

from __future__ import annotations

from typing import Any

import pytest
from fixtures.gpu_parts import device, load_processes, no_driver, node_document, part

from envtool.protocol.answers import host_report
from envtool.protocol.gpu_fields import read_gpus
from envtool.protocol.types import Answer, ProblemKind


def _report(gpus: Any, facts: dict[str, Any] | None = None) -> Any:
    return host_report(Answer("n1", 0, node_document(gpus, facts)))


def test_a_real_capture_s_values_are_read_as_they_are() -> None:
    layer = _report(part(processes=load_processes())).gpus
    assert layer is not None and layer.source == "nvidia-smi" and layer.driver == "590.48.01"
    (gpu,) = layer.devices
    assert (gpu.name, gpu.memory_total_mib, gpu.capability) == ("NVIDIA H100 80GB HBM3", 81559,
                                                                  "9.0")  # fmt: skip
    assert gpu.retired_pages_pending is None and ("retired_pages_pending", "[N/A]") in gpu.unread
    assert gpu.clock_events == ("gpu_idle",) and gpu.nvlinks is None
    assert [(p.pid, p.used_mib) for p in layer.held(gpu)] == [(11327, 2566), (11328, 1542),
                                                              (11345, 15690)]  # fmt: skip


def test_no_driver_is_read_with_its_why() -> None:
    layer = read_gpus(no_driver())
    assert layer.source == "none" and layer.devices == () and "no NVIDIA driver" in str(layer.why)
    assert not layer.xid.read


BAD = [
    ("schema", {"schema": "envtool.gpus/9"}),
    ("source", {"source": "guess"}),
    ("seconds", {"seconds": float("nan")}),
    ("devices", {"devices": "GPU 0"}),
    ("processes", {"processes": [{"gpu_uuid": "x", "pid": -1, "name": "p"}]}),
    ("pid type", {"processes": [{"gpu_uuid": "x", "pid": "11327", "name": "p"}]}),
    ("xid read", {"xid": {"read": "yes", "events": []}}),
    ("xid seconds", {"xid": {"read": True, "events": [{"xid": 79, "seconds": float("inf")}]}}),
    ("xid count 0", {"xid": {"read": True, "events": [{"xid": 79, "count": 0}]}}),
    ("xid count text", {"xid": {"read": True, "events": [{"xid": 79, "count": "636"}]}}),
    ("xid seq", {"xid": {"read": True, "events": [{"xid": 79, "seq": -1}]}}),
    ("xid first", {"xid": {"read": True, "events": [{"xid": 79, "first_seconds": -1.0}]}}),
    ("xid sub", {"xid": {"read": True, "events": [{"xid": 79, "sub": {"fatal": 1}}]}}),
    ("xid records", {"xid": {"read": True, "records": -1, "events": []}}),
    ("xid ignored", {"xid": {"read": True, "ignored": True, "events": []}}),
    ("too many GPUs", {"devices": [device(index=i) for i in range(65)]}),
]
BAD_DEVICE = [
    {"index": True},
    {"index": -1},
    {"memory_total_mib": "81559 MiB"},
    {"memory_used_mib": 2**50},
    {"ecc_uncorrected_volatile": -3},
    {"ecc_mode": "Enabled"},
    {"mig_mode": 1},
    {"pcie_width_current": 1000},
    {"capability": "sm_90"},
    {"clock_events": "hw_slowdown"},
    {"clock_events": [1]},
    {"nvlinks": [{"link": 0, "up": "yes"}]},
    {"unread": ["nvlinks"]},
    {"name": {"a": 1}},
]


def test_the_xid_tally_is_read_and_an_older_node_s_events_still_are() -> None:
    """A node of issue 33 sends one event per code and device (count, first, last, sub) and
    says what it read; one before it sent one event per record with none of that."""
    tally = {"read": True, "why": None, "source": "/dev/kmsg", "records": 100000, "ignored": 2,
             "dropped": 0, "partial": None, "events": [
                 {"xid": 149, "pci": "0019:01:00", "sub": "fatal", "count": 3, "seq": 99,
                  "text": "NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal", "seconds": 12.5,
                  "first_text": "NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal",
                  "first_seconds": 1.0, "first_seq": 7}]}  # fmt: skip
    xid = read_gpus(part(xid=tally)).xid
    assert (xid.source, xid.records, xid.ignored, xid.dropped) == ("/dev/kmsg", 100000, 2, 0)
    (e,) = xid.events
    assert (e.xid, e.sub, e.count, e.seq, e.first_seq, e.first_seconds) == (149, "fatal", 3, 99,
                                                                             7, 1.0)  # fmt: skip
    event = {"xid": 79, "pci": "0000:3b:00", "text": "NVRM: Xid", "seconds": 1.0}
    old = {"read": True, "why": None, "events": [event]}
    xid = read_gpus(part(xid=old)).xid
    (e,) = xid.events
    assert (e.count, e.sub, e.seq, e.first_text, xid.source, xid.records) == (1, "", None, "",
                                                                              "", 0)  # fmt: skip


@pytest.mark.parametrize(("what", "change"), BAD, ids=[w for w, _ in BAD])
def test_a_malformed_part_is_that_node_s_problem(what: str, change: dict[str, Any]) -> None:
    facts = {"schema": "envtool.gpu-facts/1", "python": "3.11.9", "arch_list": ["sm_90"]}
    report = _report(part(**change), facts)
    assert report.gpus is None and report.facts is not None  # the rest of the answer counts
    assert report.facts.arch_list == ("sm_90",)
    assert [(p.part, p.kind) for p in report.problems] == [("gpus", ProblemKind.MALFORMED)]


@pytest.mark.parametrize("change", BAD_DEVICE, ids=[next(iter(c)) for c in BAD_DEVICE])
def test_a_malformed_device_is_that_node_s_problem(change: dict[str, Any]) -> None:
    report = _report(part([device(**change)]))
    assert report.gpus is None
    assert [(p.part, p.kind) for p in report.problems] == [("gpus", ProblemKind.MALFORMED)]


def test_a_failed_part_says_why_and_long_strings_are_cut() -> None:
    report = _report({"error": "nvidia-smi timed out after 10 s", "kind": "failed"})
    assert [(p.part, p.kind, p.detail) for p in report.problems] == [
        ("gpus", ProblemKind.FAILED, "nvidia-smi timed out after 10 s")
    ]
    long = part(
        [device(name="x" * 10_000)],
        processes=[
            {"gpu_uuid": "u", "pid": 1, "name": "n" * 10_000, "user": "u" * 500, "used_mib": None}
        ],
    )
    layer = _report(long).gpus
    assert layer is not None and len(layer.devices[0].name) == 100
    assert len(layer.processes[0].name) == 200 and len(str(layer.processes[0].user)) == 64


def test_old_documents_read_with_defaults() -> None:
    """A node package from before the GPU layer: no part, no arch list, no bf16."""
    facts = {"schema": "envtool.gpu-facts/1", "python": "3.9.18",
             "devices": [{"index": 0, "name": "A100", "capability": "8.0"}]}  # fmt: skip
    report = host_report(Answer("n1", 0, node_document(None, facts)))
    assert report.gpus is None and report.problems == ()
    assert report.facts is not None and report.facts.arch_list == ()
    assert report.facts.devices[0].bf16 is None
    facts["devices"] = [{"index": 0, "name": "A100", "bf16": True}]
    assert host_report(Answer("n1", 0, node_document(None, facts))).facts.devices[0].bf16
