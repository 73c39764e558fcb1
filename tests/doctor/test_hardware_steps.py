"""doctor's gpus and network steps (envtool/doctor/hardware.py) on this machine: the node
package's collectors run in this process with a stand-in ``nvidia-smi`` on PATH replaying the
real H100 capture (tests/fixtures/nvidia_smi.py), NVML pointed at a library that does not exist
(so a machine with a driver replays the capture too), and NCCL_SOCKET_IFNAME set as a user
would set it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.kernel_log import Record, recorded, write_kmsg
from fixtures.nvidia_smi import install

from envtool.doctor import hardware
from envtool.doctor.steps import FAIL, PASS

NO_NVML = "/nonexistent/libnvidia-ml.so.1"


@pytest.fixture
def smi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shared_data: Path):  # type: ignore[no-untyped-def]
    """Put a stand-in replaying the H100 capture in ``state`` alone on PATH."""
    monkeypatch.setenv("ENVTOOL_NVML_LIBRARY", NO_NVML)
    monkeypatch.delenv("NCCL_SOCKET_IFNAME", raising=False)

    def put(state: str | None) -> None:
        folder = tmp_path / f"smi-{state}"
        if state is not None:
            install(folder, shared_data.parent, "h100", state)
        monkeypatch.setenv("PATH", str(folder))

    return put


def test_an_idle_h100_passes_and_says_what_was_read(smi) -> None:  # type: ignore[no-untyped-def]
    smi("idle")
    step = hardware.gpus(hardware.this_machine(), 1)
    assert step.status == PASS, step
    assert step.summary.startswith(
        "1 x NVIDIA H100 80GB HBM3, driver 590.48.01 (read by nvidia-smi)"
    )


def test_the_kernel_log_s_xids_and_what_is_not_the_driver_s(  # type: ignore[no-untyped-def]
    smi, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """NVSentinel's fallen-off-the-bus record, its address changed to the capture's GPU
    (0000:b3:00.0 → 0000:00:09.0), after a user's tmpfs mount that quoted the driver."""
    smi("idle")
    quoted = Record("tmpfs: Unknown parameter 'NVRM: Xid (PCI:0000:00:09): 79'", 3.0, 0, 3)
    monkeypatch.setenv("ENVTOOL_KERNEL_LOG", str(write_kmsg(tmp_path / "framed", [quoted])))
    step = hardware.gpus(hardware.this_machine(), 1)
    assert step.status == PASS and step.summary.endswith(
        f"(Xid log {tmp_path / 'framed'}: 1 ignored: they name the driver but are not its records)"
    )
    fallen = recorded("nvsentinel155-dmesg-fallen-off-bus.txt")[0]
    fallen = Record(fallen.message.replace("0000:b3:00.0", "0000:00:09.0"), 5.0)
    monkeypatch.setenv("ENVTOOL_KERNEL_LOG", str(write_kmsg(tmp_path / "fallen", [fallen])))
    step = hardware.gpus(hardware.this_machine(), 1)
    assert step.status == FAIL and step.summary.startswith("gpu-xid GPU 0: Xid 79; the last")
    assert step.fix.startswith("drain the node and reboot it")


def test_the_loaded_h100_fails_naming_the_pids_to_stop(smi) -> None:  # type: ignore[no-untyped-def]
    smi("load")
    step = hardware.gpus(hardware.this_machine(), 0)
    assert step.status == FAIL and step.summary.startswith(
        "gpu-busy GPU 0: GPU 0 held by pid 11327"
    )
    assert step.fix == "stop pid 11327, 11328, 11345 or use other GPUs (CUDA_VISIBLE_DEVICES)"


def test_no_driver_is_info_without_min_gpus_and_a_failure_with_it(smi) -> None:  # type: ignore[no-untyped-def]
    smi(None)
    machine = hardware.this_machine()
    step = hardware.gpus(machine, 0)
    assert step.status == PASS and step.summary.startswith("not checked: no NVIDIA driver")
    assert step.summary.endswith("no GPU required (--min-gpus 0)")
    step = hardware.gpus(machine, 1)
    assert step.status == FAIL and "no NVIDIA driver" in step.summary
    assert step.fix.startswith("install the NVIDIA driver")


def test_the_network_step_resolves_nccl_socket_ifname(smi, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    smi(None)
    step = hardware.network(hardware.this_machine())
    assert step.status != FAIL, step  # this machine's own limits may warn
    assert step.summary.startswith("NCCL's default selects ") and "/dev/shm " in step.summary
    assert "ulimit -n " in step.summary and "ulimit -l " in step.summary
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth9nothere")  # matches no interface here
    step = hardware.network(hardware.this_machine())
    assert step.status == FAIL and "NCCL_SOCKET_IFNAME" in step.summary + step.fix, step
    assert "eth9nothere" in step.summary
