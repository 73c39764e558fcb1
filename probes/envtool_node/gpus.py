"""The GPUs under the environment, read without torch: the node document's ``gpus`` part
(envtool.gpus/1).

    python -m envtool_node.gpus [--deadline SECONDS]

NVML first (nvml: a forked child abandoned at the deadline), ``nvidia-smi`` where NVML does not
load (nvsmi), neither: source "none" with why. The holders of each GPU get their user (the
owner of /proc/PID; null where the pid is not visible), and the kernel log its Xid records
(xid: ``ENVTOOL_KERNEL_LOG`` names a log to read instead of this machine's). A fact that
cannot be read is null with the reason; nothing is guessed."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import sys
import time
from typing import Any

from . import nvml, nvsmi, xid
from .gpu_device import visible

SCHEMA = "envtool.gpus/1"
# The NVML library to load instead of libnvidia-ml.so.1 (a path; a missing one means no NVML):
# how the tests replay nvidia-smi captures on a machine that has a real driver.
LIBRARY_VARIABLE = "ENVTOOL_NVML_LIBRARY"
XID_SECONDS = 2.0


def user_of(pid: int) -> str | None:
    """The user owning process ``pid`` here; None when it is not visible (another PID
    namespace, gone) or its uid has no name."""
    try:
        uid = os.stat("/proc/%d" % pid).st_uid
        return pwd.getpwuid(uid).pw_name[:64]
    except (OSError, KeyError, OverflowError):
        return None


def _command_of(pid: int) -> str | None:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            first = fh.read(4096).split(b"\0", 1)[0]
    except OSError:
        return None
    return visible(first.decode("utf-8", "replace"), 200) or None


def _read(deadline_s: float) -> tuple[str, dict[str, Any]]:
    """The source and the body it gave (driver, why, devices, processes)."""
    end = time.monotonic() + deadline_s
    answer = nvml.read(deadline_s, os.environ.get(LIBRARY_VARIABLE) or nvml.LIBRARY)
    if answer.get("loaded"):
        answer.pop("loaded", None)
        return "nvml", answer
    smi = shutil.which("nvidia-smi")
    if smi is None:
        why = "no NVIDIA driver: %s and no nvidia-smi on PATH" % answer.get("why")
        return "none", {"why": why}
    return "nvidia-smi", nvsmi.query(smi, max(0.1, end - time.monotonic()))


def collect(deadline_s: float = 10.0, kernel_log: str | None = None) -> dict[str, Any]:
    """The gpus part; never raises for what the node's GPUs or driver do. ``kernel_log``: the
    log the Xid records are read from (None: ``ENVTOOL_KERNEL_LOG``, else this machine's)."""
    started = time.monotonic()
    source, body = _read(deadline_s)
    processes = body.get("processes") or []
    for process in processes:
        process["user"] = user_of(process["pid"])
        if process.get("name") is None:
            process["name"] = _command_of(process["pid"])
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "source": source,
        "driver": body.get("driver"),
        "why": body.get("why"),
        "devices": body.get("devices") or [],
        "processes": processes,
        "processes_why": body.get("processes_why"),
        "xid": xid.read(min(XID_SECONDS, deadline_s), kernel_log),
    }
    doc["seconds"] = round(time.monotonic() - started, 4)
    return doc


def main(argv: list[str] | None = None) -> int:
    """Print the part alone (for debugging, and what a quick mode asks)."""
    args = list(sys.argv[1:] if argv is None else argv)
    deadline = 10.0
    if len(args) == 2 and args[0] == "--deadline":
        try:
            deadline = float(args[1])
        except ValueError:
            args = ["bad"]
        else:
            args = []
    if args or not 0 < deadline <= 600:
        sys.stderr.write("usage: python -m envtool_node.gpus [--deadline SECONDS]\n")
        return 2
    print(json.dumps(collect(deadline), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
