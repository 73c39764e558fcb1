"""The gpus part on a real GPU (issue 27, item 5): NVML for real, a second process holding
2 GiB named by its pid, NVML and nvidia-smi agreeing field by field, and torch's arch list
judged against each card's capability. Runs only where this interpreter's torch sees CUDA
(a lent H100/H200, a GPU CI runner); elsewhere every test here skips, since no GPU exists to
read (the replayed captures of tests/node/test_gpus.py cover the same code without one)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import REPO
from fixtures.gpu import cuda_devices

from envtool.judge import gpu_arch

PROBES = REPO / "probes"
TAG = "ENVTOOL_GPUS_REAL_TEST"
HOLD_MIB = 2048

pytestmark = pytest.mark.skipif(cuda_devices() == 0, reason="no CUDA device visible to torch")

HOLDER = f"""
import sys, time, torch
x = torch.empty({HOLD_MIB} * 1024 * 1024, dtype=torch.uint8, device="cuda:0")
torch.cuda.synchronize()
print("ready", flush=True)
time.sleep(120)
"""


def _part(*args: str, **extra: str) -> dict[str, Any]:
    env = {**os.environ, TAG: "1", **extra}
    out = subprocess.run([sys.executable, "-B", "-m", *args], cwd=PROBES, env=env,
                         capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


@pytest.fixture(scope="module")
def holder() -> Iterator[int]:
    """A second process holding 2 GiB of GPU 0 until the module ends; its pid."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, TAG: str(uuid.uuid4())})  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_nvml_names_the_holder_by_pid_user_and_memory(holder: int) -> None:
    doc = _part("envtool_node.gpus")
    assert doc["source"] == "nvml" and doc["why"] is None
    mine = [p for p in doc["processes"] if p["pid"] == holder]
    assert mine, doc["processes"]
    assert mine[0]["used_mib"] is None or mine[0]["used_mib"] >= HOLD_MIB
    import pwd

    assert mine[0]["user"] == pwd.getpwuid(os.getuid()).pw_name


FIELDS = ("name", "uuid", "memory_total_mib", "capability", "ecc_mode", "persistence_mode",
          "mig_mode", "compute_mode", "pcie_width_max", "pcie_gen_max")  # fmt: skip


def test_nvml_and_nvidia_smi_agree(holder: int) -> None:
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no nvidia-smi on PATH beside NVML")
    nvml = _part("envtool_node.gpus")
    smi = _part("envtool_node.gpus", ENVTOOL_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1")
    assert smi["source"] == "nvidia-smi"
    assert len(nvml["devices"]) == len(smi["devices"]) >= 1
    for a, b in zip(nvml["devices"], smi["devices"], strict=True):
        assert {f: a[f] for f in FIELDS} == {f: b[f] for f in FIELDS}
        assert a["pci_bus_id"].lower().lstrip("0") == b["pci_bus_id"].lower().lstrip("0")
    assert holder in {p["pid"] for p in smi["processes"]}


def test_torch_has_a_kernel_image_for_every_card_here() -> None:
    facts = _part("envtool_node.facts", "--no-runtime")
    arch = tuple(facts["arch_list"])
    assert arch and all(isinstance(a, str) for a in arch)
    for dev in facts["devices"]:
        cap = gpu_arch.capability(dev["capability"])
        assert cap is not None and gpu_arch.covers(arch, cap), (dev, arch)
        assert dev["bf16"] is (cap >= (8, 0))
        # the same card against this build's cubins of other majors only, without PTX: what
        # a cuda118 build is on an sm_100 card ("no kernel image is available")
        others = tuple(a for a in arch if a.startswith("sm_") and not a.startswith(f"sm_{cap[0]}"))
        assert not gpu_arch.covers(others, cap)
