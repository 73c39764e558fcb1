"""The Xid reader on this machine's own kernel log, after real processes put a driver's words
into it: an unprivileged user's mount in a user namespace (the kernel prints the unknown
option inside its own message) and root's write to /dev/kmsg (a userspace record). Neither is
the driver's record: the reader, from /dev/kmsg and from the real ``dmesg --kernel --raw``,
reports no Xid for them (from /dev/kmsg it counts them as ignored; that dmesg leaves
userspace's records out).

The words are the driver's older form (``NVRM: Xid (0000:e7:1f): 79``, no ``PCI:``), which
the reader before issue 33 did not match: what these tests leave in this machine's log
frames no node for a checkout of that code either. The bus id, 0000:e7:1f, is one no GPU node
is likely to have: a real card's past Xid in this machine's log (a GPU runner) is not what
these tests look for."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import require
from fixtures.kernel_log import xid_part

NOBODY = 65534


def _dmesg(*args: str) -> str:
    return subprocess.run(["dmesg", *args], capture_output=True, text=True, timeout=30,
                          check=True).stdout  # fmt: skip


def _line_with(marker: str, *args: str) -> str:
    lines = [line for line in _dmesg(*args).split("\n") if marker in line]
    require(bool(lines), f"the kernel did not log {marker} (a mount API that keeps its errors)")
    return lines[-1]


def _not_taken(part: dict[str, Any], ignored: int = 1) -> None:
    assert part["read"] is True and part["ignored"] >= ignored
    assert not [e for e in part["events"] if e["pci"] == "0000:e7:1f"], part["events"]


def _both_readers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ignored: int) -> None:
    from envtool_node import xid

    _not_taken(xid_part(Path(xid.KMSG)))  # a real process reading the device
    monkeypatch.delenv("ENVTOOL_KERNEL_LOG")
    monkeypatch.setattr(xid, "KMSG", str(tmp_path / "no-kmsg"))  # as where it cannot open
    part = xid.read(10.0)
    assert part["source"] == "dmesg"
    _not_taken(part, ignored)


def test_an_unprivileged_mount_that_quotes_the_driver_frames_no_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require(os.geteuid() == 0 and Path("/dev/kmsg").exists(), "needs root and /dev/kmsg")
    require(bool(shutil.which("unshare") and shutil.which("setpriv")), "no unshare/setpriv")
    marker = f"envtool-test-{uuid.uuid4().hex[:12]}"
    option = f"NVRM: Xid (0000:e7:1f): 79 {marker}"
    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
            "unshare", "-Urm", "mount", "-t", "tmpfs", "-o", option, "none", "/mnt"]  # fmt: skip
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    require("user namespace" not in ran.stderr, f"no user namespaces here: {ran.stderr}")
    assert ran.returncode != 0  # the option is refused, and the kernel says so in its log
    line = _line_with(marker, "--decode")  # the kernel's own record: facility 0, "kern"
    assert line.startswith("kern  :err   : [")
    assert line.split("] ", 1)[1] == f"tmpfs: Unknown parameter '{option}'"
    _both_readers(monkeypatch, tmp_path, 1)


def test_a_record_written_to_dev_kmsg_is_userspace_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require(os.geteuid() == 0 and Path("/dev/kmsg").exists(), "needs root and /dev/kmsg")
    marker = f"envtool-test-{uuid.uuid4().hex[:12]}"
    with open("/dev/kmsg", "w") as kmsg:  # <3>: KERN_ERR asked; facility 0 is not given
        kmsg.write(f"<3>NVRM: Xid (0000:e7:1f): 79, {marker}\n")
    # LOG_USER: "user" (dmesg --raw would print <3>, the level alone, as for the kernel's)
    assert _line_with(marker, "--decode").startswith("user  :err   : [")
    assert _line_with(marker, "--raw").startswith("<3>[")
    _both_readers(monkeypatch, tmp_path, 0)
