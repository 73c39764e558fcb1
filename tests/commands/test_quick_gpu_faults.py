"""The GPU layer as a node really answers, judged by preflight --quick (issue 33 item 2).

A GPU the driver lists but cannot open: nvidia-smi prints, in its place, "Unable to determine
the device handle for GPU 0000:xx:00.0: GPU is lost. Reboot the system to recover this GPU"
(or "...: Unknown Error") and exits 15, the lines quoted in NVIDIA/open-gpu-kernel-modules#387,
NVIDIA/dcgm-exporter#604 and NVIDIA/nvidia-docker#1553. It passed as "all good" with nothing
unchecked under ``--min-gpus 0``; it is now an error naming its bus id in the tool's own words.
A node without the environment still has its GPUs judged. The faults are made from the real
H100 capture (tests/fixtures/nvidia_smi.py): a second GPU (the fixture's copy of GPU 0, bus
00000000:41:00.0), then that GPU's row replaced by the line; nothing else changes."""

from __future__ import annotations

from fixtures.nvidia_smi import Faults
from test_preflight_quick import Node, _flat, node  # noqa: F401 - the module's fixture

from envtool_node import nvsmi

LOST = ("Unable to determine the device handle for GPU 00000000:41:00.0: GPU is lost.  Reboot "
        "the system to recover this GPU")  # fmt: skip


def test_a_lost_gpu_is_an_error_naming_its_bus_and_the_tool_s_words(node: Node) -> None:  # noqa: F811
    smi = node.smi("idle", Faults(extra_gpus=1, lost={1: LOST}), "lost")
    code, out, _ = node.quick(smi, "--min-gpus", "0")
    assert code == 1, out
    flat = _flat(out)
    assert "gpu-unreadable · GPU 1" in flat and "00000000:41:00.0: nvidia-smi: " in flat
    assert "GPU is lost. Reboot the system to recover this GPU" in flat
    assert "gpu-model-differs" not in flat and "GPU 0" not in flat.split("gpu-unreadable")[0]
    code, out, _ = node.quick(smi, "--min-gpus", "0", "--drain-reason")
    assert code == 1 and out == "envtool: gpu-unreadable GPU 1\n"


def test_every_gpu_lost_is_still_each_gpu_s_finding(node: Node) -> None:  # noqa: F811
    one = LOST.replace("00000000:41:00.0", "00000000:3B:00.0")
    smi = node.smi("idle", Faults(lost={0: one}), "all-lost")
    code, out, _ = node.quick(smi, "--min-gpus", "0", "--drain-reason")
    assert code == 1 and out == "envtool: gpu-unreadable GPU 0\n"


def test_each_form_nvidia_smi_prints_is_read() -> None:
    text = "\n".join([
        "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error",
        "Unable to determine the device handle for GPU0000:07:00.0: GPU is lost.  Reboot the "
        "system to recover this GPU",
        "2, NVIDIA H100 80GB HBM3",
    ])  # fmt: skip
    found = nvsmi.devices(text, ["index", "name"], {})
    assert [(d["index"], d["pci_bus_id"]) for d in found] == [
        (0, "0000:0B:00.0"),
        (1, "0000:07:00.0"),
        (2, None),
    ]
    assert found[0]["error"] == "nvidia-smi: " + text.splitlines()[0]
    assert found[1]["error"].endswith("GPU is lost.  Reboot the system to recover this GPU")
    assert "error" not in found[2] and found[2]["name"] == "NVIDIA H100 80GB HBM3"


def test_a_node_without_the_environment_still_names_its_busy_gpu(node: Node) -> None:  # noqa: F811
    """No environment at the prefix, and the real H100 load capture's processes holding GPU
    0: the GPU read without the environment is judged beside env-missing (it was "3 more
    findings follow from this (not listed)": a held GPU does not follow from a missing
    conda environment)."""
    code, out, _ = node.quick(node.smi("load"), "--prefix", str(node.root / "nowhere"))
    assert code == 1
    flat = _flat(out)
    assert "env-missing" in flat and "gpu-busy · GPU 0" in flat, flat
