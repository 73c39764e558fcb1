"""The node's Xid reader (probes/envtool_node/xid.py, xid_parse.py) on real recordings of
kernel logs (tests/fixtures/data/kernel-log/, SOURCES.md there) given to a real
``python -m envtool_node.gpus`` as its kernel log (``ENVTOOL_KERNEL_LOG``), as a stand-in
``dmesg --raw`` prints them, and on this machine's own /dev/kmsg after a real mount in a user
namespace. Each fault says which values of a recording it changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from fixtures.kernel_log import (
    Record,
    dmesg_raw,
    kmsg,
    recorded,
    stand_in_dmesg,
    write_kmsg,
    xid_part,
)


def tallied(part: dict[str, Any]) -> list[tuple[int, str, str, int]]:
    return [(e["xid"], e["pci"], e["sub"], e["count"]) for e in part["events"]]


# each recording → its driver records by (code, device, sub, count), in the order they came
RECORDINGS = {
    "gpud-dmesg-ctime-xid-119.txt": [(119, "0000:9b:00", "", 5)],
    "gpud-dmesg-iso-xid-13-flood.txt": [(13, "0000:38:00", "", 16), (43, "0000:38:00", "", 1)],
    "nvsentinel155-dmesg-fallen-off-bus.txt": [(79, "0000:b3:00", "unnumbered", 1)],
    "bumblebee554-dmesg-gpu-at-fallen.txt": [(79, "0000:01:00", "unnumbered", 2)],
    "gpud-prs-gb200-nvlink5.txt": [(144, "0000:01:00", "nonfatal", 1),
                                   (149, "0000:00:00", "fatal", 1),
                                   (149, "0019:01:00", "fatal", 1),
                                   (145, "0018:01:00", "nonfatal", 1)],
    "ogkm1150-journal-xid45-after-145-149.txt": [(45, "0000:dc:00", "", 2),
                                                 (45, "0000:ed:00", "", 2),
                                                 (45, "0000:ba:00", "", 2),
                                                 (45, "0000:97:00", "", 1)],
    "nvidia-xid-doc-old-form.txt": [(14, "0000:03:00", "", 1)],
    "gpud-kmsg-nvswitch.kmsg": [],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_each_recording_s_driver_records_by_code_and_device(tmp_path: Path, name: str) -> None:
    if name.endswith(".kmsg"):  # already /dev/kmsg records: read as they are
        log = REPO / "tests" / "fixtures" / "data" / "kernel-log" / name
    else:
        log = write_kmsg(tmp_path / "kmsg", recorded(name))
    part = xid_part(log)
    assert (part["read"], part["source"], part["partial"]) == (True, str(log), None)
    assert tallied(part) == RECORDINGS[name]
    assert part["ignored"] == part["dropped"] == 0


def test_a_record_s_first_and_last_and_where_they_are() -> None:
    from envtool_node.xid_parse import Tally, kmsg_record

    tally = Tally()
    for line in kmsg(recorded("gpud-dmesg-ctime-xid-119.txt")).splitlines():
        tally.add(*kmsg_record(line))  # type: ignore[misc]
    (e,) = tally.events()
    # the recording's 3rd and 41st lines: seconds since its first line (16:24:18 → 16:30:13)
    assert (e["first_seq"], e["first_seconds"], e["seq"], e["seconds"]) == (3, 0.0, 43, 355.0)
    assert e["first_text"].startswith("NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvi")
    assert e["text"].endswith("Expected function 76 (GSP_RM_CONTROL) (0x20803032 0x58c).")
    assert tally.records == 43


def test_a_record_of_three_lines_is_one_record_in_either_form(tmp_path: Path) -> None:
    from envtool_node.xid_parse import Tally, dmesg_records

    records = recorded("nvsentinel155-dmesg-fallen-off-bus.txt")
    said = ("NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5) installed in this system "
            "has fallen off the bus and is not responding to commands.")  # fmt: skip
    (event,) = xid_part(write_kmsg(tmp_path / "kmsg", records))["events"]  # \x0a escapes
    assert (event["text"], event["seconds"]) == (said, 1843.308145)
    tally = Tally()
    for found in dmesg_records(dmesg_raw(records)):  # further lines indented by dmesg
        tally.add(found[0], None, found[1], found[2])
    assert [e["text"] for e in tally.events()] == [said]


# What the kernel prints for `unshare -Urm mount -t tmpfs -o 'NVRM: Xid (PCI:0000:3b:00): 79'
# none /mnt` (fs/fs_context.c: "%s: Unknown parameter '%s'", KERN_ERR), and what root's `echo
# '<3>NVRM: ...' > /dev/kmsg` makes (LOG_USER: /dev/kmsg never gives userspace facility 0).
FRAMES = [
    Record("tmpfs: Unknown parameter 'NVRM: Xid (PCI:0000:3b:00): 79'", 812.5, 0, 3),
    Record("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.", 813.0, 1, 3),
    Record("x\rNVRM: Xid (PCI:0000:3b:00): 79\n<3>[ 813.5] NVRM: Xid (PCI:0000:3b:00): 79",
           813.5, 0, 3),  # a CR and a line break inside a message start no record
]  # fmt: skip


def test_text_the_driver_did_not_write_is_ignored_in_either_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envtool_node import xid

    real = recorded("gpud-dmesg-ctime-xid-119.txt")[2]  # a driver record among them
    part = xid_part(write_kmsg(tmp_path / "kmsg", [*FRAMES, real]))
    assert tallied(part) == [(119, "0000:9b:00", "", 1)] and part["ignored"] == 3
    # the same records as dmesg --raw prints them, where /dev/kmsg cannot be opened
    monkeypatch.delenv("ENVTOOL_KERNEL_LOG")
    monkeypatch.setattr(xid, "KMSG", str(tmp_path / "no-kmsg"))
    monkeypatch.setenv("PATH", str(stand_in_dmesg(tmp_path / "bin", [*FRAMES, real]).parent))
    part = xid.read(5.0)
    assert (part["source"], part["ignored"]) == ("dmesg", 3)
    assert tallied(part) == [(119, "0000:9b:00", "", 1)]


def test_a_flood_of_application_xids_keeps_the_hardware_one(tmp_path: Path) -> None:
    """One Xid 79 then 636 Xid 13 on the same GPU (the reader kept the newest 256 of any
    code: the 79 was gone). Made from the recordings: NVSentinel's 79 record with its
    address changed to the flood's GPU (0000:b3:00 → 0000:38:00), then the flood's 16 Xid 13
    records repeated to 636, their times 0.2 ms apart."""
    (fallen,) = recorded("nvsentinel155-dmesg-fallen-off-bus.txt")[:1]
    fallen = Record(fallen.message.replace("0000:b3:00.0", "0000:38:00.0"), 10.0)
    flood = [r for r in recorded("gpud-dmesg-iso-xid-13-flood.txt") if ": 13," in r.message]
    repeated = [Record(flood[i % 16].message, 20.0 + i * 0.0002) for i in range(636)]
    part = xid_part(write_kmsg(tmp_path / "kmsg", [fallen, *repeated]))
    assert tallied(part) == [(79, "0000:38:00", "unnumbered", 1), (13, "0000:38:00", "", 636)]


def test_codes_and_devices_beyond_the_bound_are_counted_as_dropped(tmp_path: Path) -> None:
    """600 devices' Xid 13 (the flood's first record, its bus number changed to 0..599 over
    domains 0..2): 512 kept, 88 counted as dropped, each further record of a kept key
    still counted."""
    (first,) = recorded("gpud-dmesg-iso-xid-13-flood.txt")[:1]
    moved = [first.message.replace("PCI:0000:38:00", f"PCI:000{i // 256}:{i % 256:02x}:00")
             for i in range(600)]  # fmt: skip
    records = [Record(m) for m in moved] + [first, first]
    part = xid_part(write_kmsg(tmp_path / "kmsg", records))
    assert (len(part["events"]), part["dropped"]) == (512, 88)
    assert tallied(part)[0xC][:3] == (13, "0000:0c:00", "")


def test_a_kernel_log_named_but_missing_is_not_read_and_never_this_machine_s(
    tmp_path: Path,
) -> None:
    part = xid_part(tmp_path / "absent")
    assert part["read"] is False and part["events"] == []
    assert part["why"] == f"{tmp_path / 'absent'}: No such file or directory"


def test_no_kmsg_and_a_failing_dmesg_say_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envtool_node import xid

    monkeypatch.delenv("ENVTOOL_KERNEL_LOG")
    monkeypatch.setattr(xid, "KMSG", str(tmp_path / "kmsg"))
    monkeypatch.setenv("PATH", str(stand_in_dmesg(tmp_path / "bin", [], rc=1).parent))
    part = xid.read(5.0)
    assert part["read"] is False and part["why"].startswith(f"{tmp_path / 'kmsg'}: No such file")
    assert part["why"].endswith("; dmesg failed: exit 1")
