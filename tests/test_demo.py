"""``make demo`` (examples/demo.py): the one-minute demonstration runs and shows the drift."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO, require
from fixtures import sshnodes


def test_demo_finds_the_drifted_node() -> None:
    require(sshnodes.available(), "OpenSSH sshd is not installed (apt-get install openssh-server)")
    out = subprocess.run(
        [sys.executable, str(REPO / "examples" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    report = out.stdout.split("$ envtool verify", 1)[1]
    for needle in (
        "build-differs",
        "pip-shadowing",
        "version-differs",
        "node3",
        "envtool verify exited 1",
    ):
        assert needle in report
    assert "node1 " not in report.replace("node[1-3]", "")  # the good nodes have no findings
    assert (
        "envtool-demo-"
        not in subprocess.run(["ls", "/tmp"], capture_output=True, text=True, check=True).stdout
    )
