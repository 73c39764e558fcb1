"""The consistency rules inside verify (per node, folded) and doctor (a step), on a real
prefix installed from the honest channel, made inconsistent the way pip makes it."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from conftest import Project
from fixtures.prefixes import add_dist_info
from fixtures.runtime import SP


@pytest.fixture
def mixed(runtime_prefix: Path) -> Path:
    """The lock installed, then CUDA 11 and CUDA 12 wheels of one library added by pip."""
    prefix = runtime_prefix
    add_dist_info(prefix, "nvidia-cublas-cu11", "11.11.3.6", sp=SP)
    add_dist_info(prefix, "nvidia-cublas-cu12", "12.1.3.1", sp=SP)
    return prefix


def _port() -> str:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return str(sock.getsockname()[1])


def test_verify_names_cuda_majors_mixed_on_a_node(mixed: Path, project: Project) -> None:
    code, out, _ = project.run(
        "verify", "--transport", "local", "--hosts", "localhost", "--prefix", str(mixed),
        "--min-gpus", "0", "--format", "json",
    )  # fmt: skip
    assert code == 1
    errors = [f for f in json.loads(out)["findings"] if f["severity"] == "error"]
    assert [(f["kind"], f["hosts"]) for f in errors] == [("cuda-mixed", ["localhost"])]
    assert "nvidia-cublas-cu11==11.11.3.6 (CUDA 11)" in errors[0]["actual"]


def test_doctor_has_a_consistency_step(mixed: Path, project: Project) -> None:
    code, out, _ = project.run(
        "doctor", "--prefix", str(mixed), "--min-gpus", "0", "--no-ddp",
        "--master-port", _port(), "--rdzv-port", _port(),
    )  # fmt: skip
    assert code == 1
    (line,) = [ln for ln in out.splitlines() if ln.split()[1:2] == ["consistency"]]
    assert line.startswith("✗") and "cuda-mixed" in line
