"""The NVML path of the gpus part (probes/envtool_node/nvml.py, nvml_device.py) for real through
ctypes, against a stand-in ``libnvidia-ml.so.1`` built here with cc from
tests/fixtures/nvml_stub.c: it exports the symbols the node calls and answers one GPU with the
values of the real H100 capture's load section (../shared/data/real/nvidia-smi/, SOURCES.md).
So the struct layouts and call signatures run for real; the values are the capture's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, require
from fixtures.nvidia_smi import install
from fixtures.sshnodes import processes_with_env

PROBES = REPO / "probes"
TAG = "ENVTOOL_GPUS_NVML_TEST"


@pytest.fixture(scope="module")
def stub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    require(cc is not None, "no C compiler (cc) to build the stand-in libnvidia-ml.so.1")
    assert cc is not None
    library = tmp_path_factory.mktemp("nvml") / "libnvidia-ml.so.1"
    source = REPO / "tests" / "fixtures" / "nvml_stub.c"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library


def run_gpus(library: Path | str, path: str, *args: str, **extra: str) -> dict[str, Any]:
    env = {**os.environ, "PATH": path, "ENVTOOL_NVML_LIBRARY": str(library), **extra}
    argv = [sys.executable, "-B", "-m", "envtool_node.gpus", *args]
    out = subprocess.run(argv, cwd=PROBES, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def test_nvml_and_nvidia_smi_agree_on_the_h100(tmp_path: Path, stub: Path,
                                               shared_data: Path) -> None:  # fmt: skip
    by_nvml = run_gpus(stub, "/nonexistent")
    folder = install(tmp_path / "smi", shared_data.parent, "h100", "load").parent
    by_smi = run_gpus("/nonexistent/libnvidia-ml.so.1", str(folder))
    assert (by_nvml["source"], by_smi["source"]) == ("nvml", "nvidia-smi")
    assert by_nvml["why"] is None and by_nvml["driver"] == by_smi["driver"] == "590.48.01"
    nvml_device, smi_device = by_nvml["devices"][0], by_smi["devices"][0]
    # both leave NVLink and retired pages unread, each with its own words
    assert set(nvml_device["unread"]) == set(smi_device["unread"]) == {
        "nvlinks", "retired_pages_pending"}  # fmt: skip
    assert {**nvml_device, "unread": {}} == {**smi_device, "unread": {}}
    held = [(p["pid"], p["used_mib"]) for p in by_nvml["processes"]]
    assert held == [(p["pid"], p["used_mib"]) for p in by_smi["processes"]]
    assert held == [(11327, 2566), (11328, 1542), (11345, 15690)]


def test_a_gpu_nvml_cannot_open_is_listed_with_nvml_s_words(stub: Path) -> None:
    """Issue 33 item 2: NVML lists two GPUs and answers NVML_ERROR_GPU_IS_LOST (15) for the
    second's handle: that GPU is in the part, every field unread, its ``error`` NVML's own
    words (the judge's gpu-unreadable), the first GPU read as before."""
    doc = run_gpus(stub, "/nonexistent", NVML_STUB_LOST="1")
    first, lost = doc["devices"]
    assert first["name"] == "NVIDIA H100 80GB HBM3" and "error" not in first
    assert lost["index"] == 1 and "GPU is lost" in lost["error"]
    assert lost["name"] is None and "GPU is lost" in lost["unread"]["name"]


def test_a_hung_nvml_is_a_reason_and_leaves_nothing_behind(stub: Path) -> None:
    tag = uuid.uuid4().hex
    doc = run_gpus(stub, "/nonexistent", "--deadline", "1.5", NVML_STUB_HANG="1", **{TAG: tag})
    assert doc["source"] == "nvml" and doc["devices"] == []
    assert doc["why"] == "NVML did not answer within 1.5 s"
    assert processes_with_env(TAG, {tag}) == {}


def test_a_child_is_waited_for_a_bounded_time_only() -> None:
    """reap never blocks: a child still running (as one stuck in a dead GPU's driver, which
    ignores SIGKILL) is left after its seconds; one that ended is reaped."""
    import time

    from envtool_node import nvml

    child = subprocess.Popen(["sleep", "30"])
    start = time.monotonic()
    assert nvml.reap(child.pid, 0.3) is False
    assert 0.3 <= time.monotonic() - start < 5.0
    child.kill()
    assert nvml.reap(child.pid, 5.0) is True
    assert nvml.reap(child.pid, 0.1) is True  # already reaped: nothing to wait for
