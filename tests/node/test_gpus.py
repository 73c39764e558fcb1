"""The node's gpus part (probes/envtool_node/gpus.py) on the four real nvidia-smi captures in
../shared/data/real/nvidia-smi/ (SOURCES.md there), replayed by a stand-in nvidia-smi on PATH
(tests/fixtures/nvidia_smi.py): ``python -m envtool_node.gpus`` runs as a real process with
NVML pointed at a library that does not exist, so the nvidia-smi path answers even on a machine
with a driver. Faults are made from a real capture by changing only the values named."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, require
from fixtures.gpu import cuda_devices
from fixtures.nvidia_smi import (
    CAPTURES,
    Faults,
    capture_file,
    column,
    install,
    read_capture,
    without_units,
)
from fixtures.sshnodes import processes_with_env

PROBES = REPO / "probes"
NO_NVML = "/nonexistent/libnvidia-ml.so.1"
TAG = "ENVTOOL_GPUS_TEST"


def run_gpus(folder: Path | None, *args: str, python: str = sys.executable,
             tag: str = "") -> dict[str, Any]:  # fmt: skip
    """``python -m envtool_node.gpus`` with only ``folder``'s nvidia-smi on PATH (none: no
    nvidia-smi at all) and no NVML; its document."""
    env = {k: v for k, v in os.environ.items() if k != "PATH"}
    env["PATH"] = str(folder) if folder is not None else "/nonexistent"
    env["ENVTOOL_NVML_LIBRARY"] = NO_NVML
    env[TAG] = tag or "untagged"
    out = subprocess.run([python, "-B", "-m", "envtool_node.gpus", *args], cwd=PROBES, env=env,
                         capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    assert doc["schema"] == "envtool.gpus/1"
    return doc


@pytest.fixture(scope="module")
def shared(shared_data: Path) -> Path:
    return shared_data.parent


def replay(tmp: Path, shared: Path, capture: str = "h100", state: str = "load",
           faults: Faults | None = None, *args: str) -> dict[str, Any]:  # fmt: skip
    folder = install(tmp / f"smi-{capture}-{state}", shared, capture, state, faults)
    return run_gpus(folder.parent, *args)


CAPABILITY = {"h100": "9.0", "h200": "9.0", "l40s": "8.9", "rtx4080": "8.9"}
MODEL = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200", "l40s": "NVIDIA L40S",
         "rtx4080": "NVIDIA GeForce RTX 4080 SUPER"}  # fmt: skip


@pytest.mark.parametrize("state", ["idle", "load"])
@pytest.mark.parametrize("capture", sorted(CAPTURES))
def test_each_capture_reads_as_recorded(tmp_path: Path, shared: Path, capture: str,
                                        state: str) -> None:  # fmt: skip
    doc = replay(tmp_path, shared, capture, state)
    data = read_capture(capture_file(shared, capture), state)
    assert doc["source"] == "nvidia-smi" and doc["why"] is None
    assert doc["driver"] == column(data, "gpu", "driver_version")[0]
    [device] = doc["devices"]
    assert device["name"] == MODEL[capture] and device["capability"] == CAPABILITY[capture]
    total = without_units(column(data, "gpu", "memory.total")[0])
    used = without_units(column(data, "gpu", "memory.used")[0])
    assert (device["memory_total_mib"], device["memory_used_mib"]) == (int(total), int(used))
    assert device["pci_bus_id"] == column(data, "gpu", "pci.bus_id")[0]
    width = column(data, "gpu", "pcie.link.width.max")[0]
    assert device["pcie_width_max"] == int(width) == device["pcie_width_current"]
    assert device["compute_mode"] == "Default" and device["nvlinks"] is None
    assert "NVLink" in device["unread"]["nvlinks"]
    pids = [int(p) for p in column(data, "compute-apps", "pid")]
    assert [p["pid"] for p in doc["processes"]] == pids
    idle = column(data, "gpu", "clocks_event_reasons.gpu_idle")[0] == "Active"
    assert ("gpu_idle" in device["clock_events"]) == idle
    assert doc["xid"]["read"] in (True, False) and isinstance(doc["seconds"], float)


def test_the_h100_under_load_names_its_three_holders(tmp_path: Path, shared: Path) -> None:
    doc = replay(tmp_path, shared, "h100", "load")
    held = [(p["pid"], p["name"], p["used_mib"]) for p in doc["processes"]]
    assert held == [(11327, "/root/tools/memhog", 2566), (11328, "/root/tools/memhog", 1542),
                    (11345, "./gpu_burn", 15690)]  # fmt: skip
    assert {p["gpu_uuid"] for p in doc["processes"]} == {doc["devices"][0]["uuid"]}
    device = doc["devices"][0]
    assert device["ecc_mode"] is True and device["ecc_uncorrected_volatile"] == 0
    assert device["remapped_rows_pending"] is False and device["mig_mode"] is False
    assert device["fabric_state"] == "Completed" and device["fabric_status"] == "Success"
    assert device["retired_pages_pending"] is None  # Hopper remaps rows: nvidia-smi says [N/A]
    assert device["unread"]["retired_pages_pending"] == "[N/A]"


def test_the_desktop_card_has_no_ecc_and_says_so(tmp_path: Path, shared: Path) -> None:
    device = replay(tmp_path, shared, "rtx4080", "load")["devices"][0]
    for key in ("ecc_mode", "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate",
                "remapped_rows_pending", "mig_mode"):  # fmt: skip
        assert device[key] is None and device["unread"][key] == "[N/A]", key
    assert device["persistence_mode"] is False  # "Disabled" in the capture
    assert device["fabric_state"] is None and device["unread"]["fabric_state"] == "N/A"


# Each fault: the values changed in the H100's load capture → the fields that must change.
FAULTS = {
    # an uncorrectable ECC error counts in both the volatile and the aggregate total
    "ecc": ({"ecc.errors.uncorrected.volatile.total": "2",
             "ecc.errors.uncorrected.aggregate.total": "2",
             "ecc.errors.uncorrected.volatile.dram": "2",
             "ecc.errors.uncorrected.aggregate.dram": "2"},
            {"ecc_uncorrected_volatile": 2, "ecc_uncorrected_aggregate": 2}),
    # a pending remap: one uncorrectable row, remapped at the next reset
    "remap": ({"remapped_rows.uncorrectable": "1", "remapped_rows.pending": "Yes"},
              {"remapped_rows_pending": True}),
    # the H100 prints [N/A] here (it remaps rows); set as a pre-Ampere card prints it
    "retired": ({"retired_pages.double_bit.count": "1", "retired_pages.pending": "Yes"},
                {"retired_pages_pending": True}),
    "pcie_x8": ({"pcie.link.width.current": "8"}, {"pcie_width_current": 8}),
    "mig": ({"mig.mode.current": "Enabled", "mig.mode.pending": "Enabled"}, {"mig_mode": True}),
    "persistence_off": ({"persistence_mode": "Disabled"}, {"persistence_mode": False}),
    "exclusive": ({"compute_mode": "Exclusive_Process"}, {"compute_mode": "Exclusive_Process"}),
    # HW slowdown asserted: its reason Active and its bit (0x8) in the active mask
    "hw_slowdown": ({"clocks_event_reasons.hw_slowdown": "Active",
                     "clocks_event_reasons.active": "0x0000000000000008"},
                    {"clock_events": ["hw_slowdown"]}),
}  # fmt: skip


@pytest.fixture(scope="module")
def h100_load(tmp_path_factory: pytest.TempPathFactory, shared: Path) -> dict[str, Any]:
    return replay(tmp_path_factory.mktemp("baseline"), shared, "h100", "load")


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_fault_changes_exactly_its_field(
    tmp_path: Path, shared: Path, h100_load: dict[str, Any], fault: str
) -> None:
    values, expected = FAULTS[fault]
    doc = replay(tmp_path, shared, "h100", "load", Faults(values=values))
    before, after = h100_load["devices"][0], doc["devices"][0]
    changed = {k: after[k] for k in after if after[k] != before[k]}
    if "retired_pages_pending" in expected:  # it was unread before; now it is read
        assert "retired_pages_pending" not in after["unread"]
        changed.pop("unread")
    assert changed == expected
    assert doc["processes"] == h100_load["processes"]


def test_a_two_gpu_node_and_processes_added_and_removed(tmp_path: Path, shared: Path) -> None:
    mine = os.getpid()  # a pid that is visible here: its user is named
    faults = Faults(
        extra_gpus=1,
        drop_pids=(11345,),
        add_apps=({"gpu_uuid": "GPU-00000000-0000-0000-0000-000000000001", "pid": str(mine),
                   "process_name": "python, worker 1", "used_gpu_memory": "2048 MiB"},),
    )  # fmt: skip
    doc = replay(tmp_path, shared, "h100", "load", faults)
    assert [d["index"] for d in doc["devices"]] == [0, 1]
    assert (
        len({d["uuid"] for d in doc["devices"]})
        == len({d["pci_bus_id"] for d in doc["devices"]})
        == 2
    )
    assert doc["devices"][1]["name"] == doc["devices"][0]["name"]
    by_pid = {p["pid"]: p for p in doc["processes"]}
    assert sorted(by_pid) == sorted([11327, 11328, mine])
    added = by_pid[mine]
    assert added["name"] == "python, worker 1" and added["used_mib"] == 2048
    assert added["user"] == pwd.getpwuid(os.getuid()).pw_name
    assert added["gpu_uuid"] == doc["devices"][1]["uuid"]


def test_an_older_nvidia_smi_names_clock_events_by_throttling(tmp_path: Path, shared: Path) -> None:
    values = {"clocks_event_reasons.sw_power_cap": "Active"}  # set before renaming
    doc = replay(tmp_path, shared, "h100", "load", Faults(values=values, old_names=True))
    assert doc["why"] is None and doc["devices"][0]["clock_events"] == ["sw_power_cap"]


def test_a_hung_nvidia_smi_is_a_reason_and_leaves_nothing_behind(
    tmp_path: Path, shared: Path
) -> None:
    folder = install(tmp_path / "smi", shared, "h100", "load", Faults(hang_s=120)).parent
    tag = uuid.uuid4().hex
    doc = run_gpus(folder, "--deadline", "1.5", tag=tag)
    assert doc["source"] == "nvidia-smi" and doc["devices"] == []
    assert doc["why"] == "nvidia-smi did not answer within 1.5 s"
    assert processes_with_env(TAG, {tag}) == {}


GARBAGE = {
    "control characters": "\x1b[2J\x00\x07" * 50,
    "not csv": "Segmentation fault (core dumped)\n",
    "numbers without fields": "1, 2, 3\n" * 10,
}


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_garbage_overall_is_a_reason(tmp_path: Path, shared: Path, kind: str) -> None:
    doc = replay(tmp_path, shared, "h100", "load", Faults(output=GARBAGE[kind]))
    assert doc["devices"] == [] and doc["why"].startswith("nvidia-smi printed no readable row")
    assert all(c.isprintable() for c in doc["why"])


def test_endless_output_is_cut_and_a_reason(tmp_path: Path, shared: Path) -> None:
    doc = replay(tmp_path, shared, "h100", "load", Faults(output="x" * (5 * 1024 * 1024)))
    assert doc["devices"] == [] and "printed more than" in doc["why"]


def test_a_failing_nvidia_smi_is_a_reason(tmp_path: Path, shared: Path) -> None:
    faults = Faults(output="No devices were found\n", rc=6)  # nvidia-smi's words and status
    doc = replay(tmp_path, shared, "h100", "load", faults)
    assert doc["why"] == "nvidia-smi failed (exit 6): No devices were found"


def test_garbage_in_a_field_is_that_field_unread(tmp_path: Path, shared: Path,
                                                 h100_load: dict[str, Any]) -> None:  # fmt: skip
    values = {"memory.total": "lots MiB", "name": "NVIDIA\x07H100", "compute_cap": "nine",
              "pcie.link.width.current": "-8"}  # fmt: skip
    device = replay(tmp_path, shared, "h100", "load", Faults(values=values))["devices"][0]
    for key in ("memory_total_mib", "name", "capability", "pcie_width_current"):
        assert device[key] is None and device["unread"][key].startswith("nvidia-smi printed")
        assert all(c.isprintable() for c in device["unread"][key])
    assert device["memory_used_mib"] == h100_load["devices"][0]["memory_used_mib"]


def test_no_nvidia_smi_and_no_nvml_is_source_none() -> None:
    doc = run_gpus(None)
    assert doc["source"] == "none" and doc["devices"] == [] and doc["processes"] == []
    assert doc["why"].startswith("no NVIDIA driver: ") and "no nvidia-smi on PATH" in doc["why"]


def test_the_node_document_has_the_gpus_part(tmp_path: Path, shared: Path) -> None:
    folder = install(tmp_path / "smi", shared, "l40s", "load").parent
    (tmp_path / "env" / "conda-meta").mkdir(parents=True)
    env = {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}",
           "ENVTOOL_NVML_LIBRARY": NO_NVML}  # fmt: skip
    argv = [sys.executable, "-B", "-m", "envtool_node", "--prefix", str(tmp_path / "env"),
            "--no-torch"]  # fmt: skip
    out = subprocess.run(argv, cwd=PROBES, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    gpus = json.loads(out.stdout)["gpus"]
    assert gpus["source"] == "nvidia-smi" and gpus["devices"][0]["name"] == "NVIDIA L40S"
    assert [p["name"] for p in gpus["processes"]] == ["ffmpeg", "ffmpeg"]
    out = subprocess.run([*argv, "--no-gpus"], cwd=PROBES, env=env, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0 and "gpus" not in json.loads(out.stdout)


def test_this_machine_as_it_is() -> None:
    """No stand-in: a machine with a GPU reads it through NVML; one without says why."""
    env = {**os.environ, TAG: "this-machine"}
    argv = [sys.executable, "-B", "-m", "envtool_node.gpus"]
    out = subprocess.run(argv, cwd=PROBES, env=env, capture_output=True, text=True, timeout=60,
                         check=True)  # fmt: skip
    doc = json.loads(out.stdout)
    if cuda_devices() > 0:
        assert doc["source"] == "nvml" and doc["why"] is None
        assert len(doc["devices"]) >= cuda_devices()
        assert all(d["capability"] and d["memory_total_mib"] for d in doc["devices"])
    else:
        assert doc["devices"] == [] and doc["why"]


def test_the_stand_in_and_the_part_under_python39(tmp_path: Path, shared: Path) -> None:
    py39 = Path.home() / ".pyenv" / "versions" / "3.9.18" / "bin" / "python3"
    require(py39.is_file(), f"{py39} is absent (pyenv 3.9.18)")
    folder = install(tmp_path / "smi", shared, "h200", "load", python=str(py39)).parent
    doc = run_gpus(folder, python=str(py39))
    assert doc["devices"][0]["name"] == "NVIDIA H200" and len(doc["processes"]) == 3


# An Xid line in the form the NVIDIA driver logs it (NVIDIA's Xid catalogue: "NVRM: Xid
# (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus."); the recordings' own records are
# read in tests/node/test_xid.py.
XID_79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1912, name=python, GPU has fallen off the bus."


def test_xid_events_from_kmsg_records_and_dmesg_lines() -> None:
    from envtool_node import xid_parse

    found = xid_parse.kmsg_record("3,4711,1234567890,-;" + XID_79 + "\n SUBSYSTEM=pci\n")
    assert found == (0, 4711, 1234.56789, XID_79)
    assert xid_parse.driver_event(XID_79) == (79, "0000:3b:00", "")
    assert list(xid_parse.dmesg_records("<3>[ 1234.567890] " + XID_79)) == [(0, 1234.56789, XID_79)]
    assert xid_parse.driver_event("e1000e: eth0 NIC Link is Up") is None
    assert xid_parse.kmsg_record("garbage\x00\x1b") is None


def test_an_unreadable_kernel_log_is_not_read_and_says_why(tmp_path: Path) -> None:
    """/dev/kmsg absent (here: the reader pointed at a path that is not there) and no dmesg."""
    code = ("import json; from envtool_node import xid; xid.KMSG = %r; "
            "print(json.dumps(xid.read(1.0)))")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "ENVTOOL_KERNEL_LOG"}
    env["PATH"] = str(tmp_path)  # no dmesg either
    argv = [sys.executable, "-c", code % str(tmp_path / "kmsg")]
    out = subprocess.run(argv, cwd=PROBES, env=env, capture_output=True, text=True, timeout=30,
                         check=True)  # fmt: skip
    doc = json.loads(out.stdout)
    assert doc["read"] is False and doc["events"] == []
    assert "kmsg: No such file or directory" in doc["why"] and "no dmesg" in doc["why"]
