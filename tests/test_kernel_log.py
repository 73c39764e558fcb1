"""The suite reads no machine's kernel log (issue 33 item 6): on a GPU runner with a past Xid,
or where another process had the kernel print Xid text, the GPU and verify tests failed
(``test_healthy_h100_nodes_give_no_gpu_finding``, the pairs and bisect tests, doctor's idle
H100 step, ...). Every node package a test starts now reads ``ENVTOOL_KERNEL_LOG``, set by
tests/conftest.py to a recorded healthy log (tests/fixtures/kernel_log.HEALTHY) whatever the
environment says, and given to the sshd nodes' sessions (tests/fixtures/sshnodes.py).

Here those tests run in a pytest of their own whose environment names, as this machine's
kernel log, one that holds an Xid 79 on the H100 capture's GPU: they pass unchanged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO
from fixtures.kernel_log import Record, recorded, write_kmsg, xid_part

TESTS = [
    "tests/commands/test_verify_gpus.py::test_healthy_h100_nodes_give_no_gpu_finding",
    "tests/commands/test_verify_gpus.py::test_a_busy_gpu_is_named_with_its_pids_over_the_local_transport",
    "tests/commands/test_preflight_quick.py::test_a_healthy_idle_h100_passes_without_a_drain_reason",
    "tests/doctor/test_hardware_steps.py::test_an_idle_h100_passes_and_says_what_was_read",
    "tests/node/test_gpus.py::test_each_capture_reads_as_recorded",
]


def test_the_gpu_and_verify_tests_are_unchanged_by_an_xid_79_in_the_kernel_log(
    tmp_path: Path,
) -> None:
    """NVSentinel's fallen-off-the-bus record, its address changed to the H100 capture's GPU
    (0000:b3:00.0 → 0000:00:09.0)."""
    fallen = recorded("nvsentinel155-dmesg-fallen-off-bus.txt")[0]
    log = write_kmsg(tmp_path / "kmsg", [Record(fallen.message.replace("b3:00.0", "00:09.0"))])
    events = [(e["xid"], e["pci"]) for e in xid_part(log)["events"]]
    assert events == [(79, "0000:00:09")]  # what a node reading it reports
    env = {**os.environ, "ENVTOOL_KERNEL_LOG": str(log)}
    env.pop("PYTEST_XDIST_WORKER", None)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS]
    out = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
                         check=False)  # fmt: skip
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and " failed" not in out.stdout
