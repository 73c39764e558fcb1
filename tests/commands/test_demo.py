"""``make demo`` (examples/demo.py): the one-minute demonstration runs and shows the drift,
then a new lab member's ``envtool doctor`` passing on a good node's prefix."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO, require
from fixtures import sshnodes


def _demo_argv() -> list[str]:
    """``make demo`` where this interpreter is the Makefile's venv (CI), else the script."""
    venv = Path(sys.executable).parent.parent
    if shutil.which("make") and (venv / ".envtool-test-installed").is_file():
        return ["make", "-s", "demo", f"VENV={venv}"]
    return [sys.executable, str(REPO / "examples" / "demo.py")]


def _own_network(argv: list[str]) -> list[str]:
    """``argv`` in a network namespace of its own where root may make one: the demo's sshd
    nodes, its verify and doctor's port check then share no port with the tests of the other
    xdist worker (whose clusters listen on the rendezvous port 29400 of this namespace)."""
    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("ip")):
        return argv
    return ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$0" "$@"', *argv]


def test_demo_finds_the_drifted_node_and_doctor_passes() -> None:
    require(sshnodes.available(), "OpenSSH sshd is not installed (apt-get install openssh-server)")
    argv = _own_network(_demo_argv())
    out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    report, doctor = out.stdout.split("$ envtool verify", 1)[1].split("$ envtool doctor", 1)
    for needle in (
        "build-differs",
        "pip-shadowing",
        "version-differs",
        "loaded-outside-prefix",
        "PYTHONPATH",
        "node3",
        "envtool verify exited 1",
    ):
        assert needle in report
    assert "node1 " not in report.replace("node[1-3]", "")  # the good nodes have no findings
    for step in (
        "lockfile",
        "environment",
        "packages",
        "consistency",
        "torch",
        "cuda",
        "ddp",
        "gpus",
        "network",
        "ports",
    ):
        assert any(line.split()[1:2] == [step] for line in doctor.splitlines()), step
    assert "all 10 checks passed" in doctor and "envtool doctor exited 0" in doctor
    assert (
        "envtool-demo-"
        not in subprocess.run(["ls", "/tmp"], capture_output=True, text=True, check=True).stdout
    )
