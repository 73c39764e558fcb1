"""judge/gpu_xid.py and judge/xid_catalog.py: a node's Xid records judged by what NVIDIA's
catalog says to do first. The records are the real recordings' (tests/fixtures/data/
kernel-log/) as the node's own tally makes them (envtool_node/xid_parse.py); the card is the
H100 capture's (tests/fixtures/gpu_parts.py), its ``pci_bus_id`` changed to each recording's
GPU where a test says so."""

from __future__ import annotations

from typing import Any

from fixtures.gpu_parts import device, node_document, part
from fixtures.kernel_log import Record, kmsg, recorded

from envtool.judge import xid_catalog
from envtool.judge.cluster_policy import GpuExpect
from envtool.judge.findings import Finding, Kind, Severity, exit_code
from envtool.judge.gpu_health import check
from envtool.judge.xid_catalog import Resolution, resolution
from envtool.protocol.answers import host_report
from envtool.protocol.types import Answer
from envtool.report.drain import reason
from envtool.report.labels import words


def events(records: list[Record]) -> list[dict[str, Any]]:
    """The node's tally of ``records`` (as /dev/kmsg records)."""
    from envtool_node.xid_parse import Tally, kmsg_record

    tally = Tally()
    for line in kmsg(records).splitlines():
        found = kmsg_record(line)
        assert found is not None
        tally.add(*found)
    return tally.events()


def judged(records: list[Record], pci_bus_id: str = "00000000:00:09.0") -> list[Finding]:
    gpus = part([device(pci_bus_id=pci_bus_id)], events=events(records))
    report = host_report(Answer("n1", 0, node_document(gpus)))
    return check([report], GpuExpect(), 1)


def test_a_gsp_timeout_resets_the_gpu_and_names_its_last_record() -> None:
    found = judged(recorded("gpud-dmesg-ctime-xid-119.txt"), "00000000:9B:00.0")
    (f,) = found
    assert (f.kind, f.severity, f.subject, f.cause) == (Kind.GPU_XID, Severity.ERROR, "GPU 0",
                                                        "reset-gpu")  # fmt: skip
    w = words(f)
    assert w.actual.startswith("Xid 119 (5 records); the last Xid 119 (GSP RPC timeout), "
                               "kernel record 43, 355.000 s after boot: NVRM: Xid (PCI:0000:"
                               "9b:00): 119, pid=1240590, name=gpud")  # fmt: skip
    assert w.fix.startswith("drain the node; reset GPU 0 (nvidia-smi -r -i N)")
    assert reason(found) == "envtool: gpu-xid GPU 0"


def test_a_gpu_fallen_off_the_bus_without_its_number_reboots_the_node() -> None:
    (f,) = judged(recorded("nvsentinel155-dmesg-fallen-off-bus.txt"), "00000000:B3:00.0")
    assert (f.kind, f.cause) == (Kind.GPU_XID, "reboot-node")
    assert "the last record of it, printed without an Xid number (Xid 79's meaning)" in f.actual
    assert "1843.308 s after boot: NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID" in f.actual
    assert "no GPU reset brings GPU 0 back" in words(f).fix
    # the same records on a node whose cards do not list that GPU (it fell off): its address
    (f,) = judged(recorded("bumblebee554-dmesg-gpu-at-fallen.txt"))
    assert (f.subject, f.cause) == ("PCI 0000:01:00", "reboot-node")
    assert f.actual.startswith("Xid 79 (2 records); the last record of it, printed without")


def test_gb200_nvlink5_fatal_resets_and_nonfatal_is_nothing() -> None:
    found = judged(recorded("gpud-prs-gb200-nvlink5.txt"))
    assert sorted((f.kind, f.subject, f.cause) for f in found) == [
        (Kind.GPU_XID, "PCI 0000:00:00", "reset-gpu"),
        (Kind.GPU_XID, "PCI 0019:01:00", "reset-gpu"),
    ]  # 144 and 145 printed Nonfatal: the decode sheet's IGNORE
    assert all("NVLink NETIR error (fatal)" in f.actual for f in found)


def test_cleanup_after_another_xid_and_application_xids_drain_nothing() -> None:
    assert judged(recorded("ogkm1150-journal-xid45-after-145-149.txt")) == []  # 45: follow 145/149
    flood = recorded("gpud-dmesg-iso-xid-13-flood.txt")  # its GPU 0000:38:00 is GPU 0 here
    (f,) = judged(flood, "00000000:38:00.0")
    assert (f.kind, f.severity, f.cause) == (Kind.GPU_XID_APP, Severity.INFO, "restart-app")
    assert f.actual.startswith("Xid 13 (16 records); the last Xid 13 (graphics engine exc")
    assert "restart the application" in words(f).fix
    assert reason([f]) == "" and exit_code([f]) == 0  # 43 alongside: IGNORE


def test_a_hardware_xid_behind_an_application_flood_still_drains() -> None:
    """NVSentinel's unnumbered 79 moved to the flood's GPU (0000:b3:00 → 0000:38:00), then
    the flood's 16 Xid 13 repeated to 636."""
    fallen = recorded("nvsentinel155-dmesg-fallen-off-bus.txt")[0]
    fallen = Record(fallen.message.replace("0000:b3:00.0", "0000:38:00.0"), 5.0)
    flood = [r for r in recorded("gpud-dmesg-iso-xid-13-flood.txt") if ": 13," in r.message]
    found = judged([fallen, *(flood * 40)[:636]], "00000000:38:00.0")
    assert [(f.kind, f.cause) for f in found] == [(Kind.GPU_XID, "reboot-node"),
                                                  (Kind.GPU_XID_APP, "restart-app")]  # fmt: skip
    assert "Xid 13 (636 records)" in found[1].actual
    assert reason(found) == "envtool: gpu-xid GPU 0"


def test_xid_154_carries_the_driver_s_own_ask() -> None:
    """The 119 recording's first Xid record with its code and text changed to the Xid 154
    the driver prints after a 79 (NVIDIA's form: "GPU recovery action changed from 0x0
    (None) to 0x2 (Node Reboot Required)"), and again with 0x0 (None)."""
    base = recorded("gpud-dmesg-ctime-xid-119.txt")[2]
    head = "NVRM: Xid (PCI:0000:00:09): 154, GPU recovery action changed from 0x0 (None) to "
    ask = [Record(head + "0x2 (Node Reboot Required)", base.seconds)]
    (f,) = judged(ask)
    assert (f.cause, "the driver asks for: node reboot" in f.actual) == ("reboot-node", True)
    assert judged([Record(head + "0x0 (None)", base.seconds)]) == []


def test_the_catalog_s_resolutions() -> None:
    assert resolution(79) is Resolution.REBOOT and resolution(79, "unnumbered") is Resolution.REBOOT
    assert resolution(13) is resolution(31) is resolution(94) is Resolution.RESTART_APP
    assert resolution(48) is resolution(119) is resolution(120) is Resolution.RESET_GPU
    assert resolution(63) is resolution(92) is resolution(45) is Resolution.IGNORE
    assert (resolution(149, "fatal"), resolution(149, "nonfatal")) == (
        Resolution.RESET_GPU,
        Resolution.IGNORE,
    )
    assert resolution(1) is resolution(99_999) is Resolution.CONTACT_SUPPORT  # unused, unknown
    assert resolution(154, "0x4") is Resolution.RESET_GPU and resolution(154, "0xZZ") is (
        Resolution.IGNORE
    )
    assert "docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html" in (
        xid_catalog.__doc__ or ""
    )
    assert all(r.drains for r in (Resolution.RESET_GPU, Resolution.REBOOT,
                                  Resolution.CONTACT_SUPPORT))  # fmt: skip
    assert not Resolution.RESTART_APP.drains


def test_an_older_node_s_one_event_per_record_is_counted() -> None:
    """The part as a node before the tally sent it: one event per record, no count."""
    text = "NVRM: Xid (PCI:0000:00:09): 79, GPU has fallen off the bus."
    old = [{"xid": 79, "pci": "0000:00:09", "text": text, "seconds": s} for s in (1.0, 2.0)]
    gpus = part(events=old)
    (f,) = check([host_report(Answer("n1", 0, node_document(gpus)))], GpuExpect(), 1)
    assert f.actual.startswith("Xid 79 (2 records); the last Xid 79 (GPU has fallen off the bus"
                               "), 2.000 s after boot")  # fmt: skip


def test_a_log_read_in_part_is_said_beside_all_good() -> None:
    from envtool.judge.unchecked import unread

    partial = {"read": True, "why": None, "events": [], "source": "/dev/kmsg", "records": 1024,
               "partial": "stopped after 1024 records at the deadline"}  # fmt: skip
    report = host_report(Answer("n1", 0, node_document(part(xid=partial))))
    assert unread([report]) == (
        "Xid log on n1 (read in part there: stopped after 1024 records at the deadline)",
    )
