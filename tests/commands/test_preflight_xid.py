"""``envtool preflight --quick --drain-reason`` (a Slurm prolog) on a node whose kernel log
holds Xid text: a real ``envtool`` process, a stand-in ``nvidia-smi`` replaying the H100's
idle capture (../shared/data/real/nvidia-smi/: its GPU at 00000000:00:09.0), a real lock with
its records in a prefix, and a kernel log made from the recordings in tests/fixtures/data/
kernel-log/ (``ENVTOOL_KERNEL_LOG``). Each fault says which values of a recording it changed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from fixtures.kernel_log import HEALTHY, Record, kmsg, recorded
from fixtures.lock_records import real_prefix
from fixtures.nvidia_smi import install

NO_NVML = "/nonexistent/libnvidia-ml.so.1"


@dataclass(frozen=True)
class Node:
    root: Path
    lock: Path
    prefix: Path
    smi: Path

    def quick(self, records: list[Record], *args: str) -> tuple[int, str, str]:
        """``envtool preflight --quick`` with the recorded healthy log, then ``records``."""
        log = self.root / f"kmsg-{len(list(self.root.glob('kmsg-*')))}"
        log.write_text(HEALTHY.read_text().rstrip("\n") + "\n" + kmsg(records, first_seq=5000))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CONDA_"))}
        env.update(ENVTOOL_NVML_LIBRARY=NO_NVML, ENVTOOL_KERNEL_LOG=str(log), COLUMNS="200",
                   ENVTOOL_CACHE_DIR=str(self.root / "cache"), PATH=str(self.smi))  # fmt: skip
        argv = [sys.executable, "-m", "envtool", "preflight", "--quick", "--lockfile",
                str(self.lock), "--prefix", str(self.prefix), *args]  # fmt: skip
        out = subprocess.run(argv, cwd=self.root, env=env, capture_output=True, text=True,
                             timeout=60, check=False)  # fmt: skip
        return out.returncode, out.stdout, out.stderr


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Node:
    root = tmp_path_factory.mktemp("quick-xid")
    lock, prefix = real_prefix(root, shared_data)
    smi = install(root / "smi", shared_data.parent, "h100", "idle", None).parent
    return Node(root, lock, prefix, smi)


def _flat(text: str) -> str:
    return " ".join(text.split())


# What any user makes the kernel print (fs/fs_context.c, KERN_ERR, facility 0) with
# `unshare -Urm mount -t tmpfs -o 'NVRM: Xid (PCI:0000:00:09): 79' none /mnt`: the H100
# capture's own GPU named; and root's `echo '<3>NVRM: Xid (PCI:0000:00:09): 79, ...' >
# /dev/kmsg` (facility LOG_USER).
FRAMED = [
    Record("tmpfs: Unknown parameter 'NVRM: Xid (PCI:0000:00:09): 79'", 900.0, 0, 3),
    Record("NVRM: Xid (PCI:0000:00:09): 79, pid=1, GPU has fallen off the bus.", 901.0, 1, 3),
]


def test_text_that_is_not_the_driver_s_drains_no_node(node: Node) -> None:
    """Before issue 33 this node was drained for ``gpu-xid GPU 0``."""
    code, out, err = node.quick(FRAMED, "--drain-reason")
    assert (code, out) == (0, ""), err
    code, out, err = node.quick(FRAMED)
    assert code == 0 and _flat(out).startswith("1 host passes"), (out, err)


def _behind_a_flood() -> list[Record]:
    """NVSentinel's unnumbered fallen-off-the-bus record, its address changed to the H100
    capture's (0000:b3:00.0 → 0000:00:09.0), then the 16 Xid 13 records of the gpud flood
    recording, their address changed the same way (0000:38:00 → 0000:00:09), repeated to 636."""
    fallen = recorded("nvsentinel155-dmesg-fallen-off-bus.txt")[0]
    fallen = Record(fallen.message.replace("0000:b3:00.0", "0000:00:09.0"), 4000.0)
    flood = [Record(r.message.replace("0000:38:00", "0000:00:09"))
             for r in recorded("gpud-dmesg-iso-xid-13-flood.txt")
             if ": 13," in r.message]  # fmt: skip
    return [fallen, *[Record(r.message, 4100.0) for r in (flood * 40)[:636]]]


def test_a_gpu_fallen_off_the_bus_behind_636_application_xids_drains_the_node(
    node: Node,
) -> None:
    code, out, _ = node.quick(_behind_a_flood(), "--drain-reason")
    assert (code, out) == (1, "envtool: gpu-xid GPU 0\n")
    code, out, _ = node.quick(_behind_a_flood())
    flat = _flat(out)
    assert code == 1 and "gpu-xid · GPU 0" in flat
    assert (
        "printed without an Xid number (Xid 79's meaning), kernel record 5000, 4000.000 s" in flat
    )
    assert "drain the node and reboot it" in flat
    assert "Xid 13 (636 records)" in flat  # the application's, as a note beside it


def test_the_application_s_xids_alone_drain_nothing(node: Node) -> None:
    code, out, err = node.quick(_behind_a_flood()[1:], "--drain-reason")
    assert (code, out) == (0, ""), err
