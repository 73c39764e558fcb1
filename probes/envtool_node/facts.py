"""GPU and runtime facts of this node, as one JSON document on stdout.

Runs on cluster nodes under the environment's Python (3.9+), standard library plus torch.
Without torch or without a GPU it reports what it can and says why in ``notes``.

    python -m envtool_node.facts [--no-torch] [--no-runtime]

``--no-runtime`` leaves out what the interpreter really loaded (bench/bench_runtime.py
measures what that part costs).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from typing import Any

from . import runtime
from .schema import FACTS

ENV_PREFIXES = ("NCCL_",)
ENV_NAMES = (
    "CUDA_VISIBLE_DEVICES",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    # what decides which python, torch and libraries the process loads (envtool_node.runtime)
    "PYTHONPATH",
    "PYTHONNOUSERSITE",
    "PYTHONHOME",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "CUDA_HOME",
    "CONDA_PREFIX",
)
# Values of these look like secrets whatever their name says: never collected.
SECRET_HINTS = ("TOKEN", "PASSWORD", "PASSWD", "SECRET", "KEY", "CREDENTIAL")


def collected_env(environ: dict[str, str]) -> dict[str, str]:
    """The allow-listed variables that decide DDP behaviour (NCCL_*, CUDA_VISIBLE_DEVICES...)."""
    out = {}
    for name in sorted(environ):
        wanted = name in ENV_NAMES or name.startswith(ENV_PREFIXES)
        if wanted and not any(hint in name.upper() for hint in SECRET_HINTS):
            out[name] = environ[name]
    return out


def driver_version(notes: list[str]) -> str | None:
    """The NVIDIA driver version, from /proc or nvidia-smi; None when there is no driver."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8", errors="replace") as fh:
            match = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9]+(?:\.[0-9]+)+)", fh.read())
            if match:
                return match.group(1)
    except OSError:
        pass
    smi = shutil.which("nvidia-smi")
    if smi is None:
        notes.append("no NVIDIA driver: /proc/driver/nvidia/version and nvidia-smi are absent")
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        notes.append("nvidia-smi failed: %s" % (str(exc).splitlines() or ["?"])[0])
        return None
    first = out.strip().splitlines()
    return first[0].strip() if first else None


MACHINE_ID = re.compile(r"[0-9a-f]{32}")
BOOT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _read_id(path: str, pattern: re.Pattern[str]) -> str | None:
    """The first line of a small id file when it has the id's shape; None otherwise (a file
    that is absent, unreadable, or not an id: a device or a huge file reads 128 bytes only)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(128)
    except OSError:
        return None
    text = head.decode("ascii", errors="replace").strip().lower()
    return text if pattern.fullmatch(text) else None


def machine_ids() -> dict[str, str | None]:
    """What tells this machine from another one with the same hostname: systemd's
    ``/etc/machine-id`` and the kernel's id of this boot (envtool groups names that reach one
    machine: listed twice, its GPUs would get two nodes' ranks)."""
    return {
        "machine_id": _read_id("/etc/machine-id", MACHINE_ID),
        "boot_id": _read_id("/proc/sys/kernel/random/boot_id", BOOT_ID),
    }


def glibc_version() -> str | None:
    """The C library's version (``2.36``), None when it is not glibc."""
    name, version = platform.libc_ver()
    return version if name == "glibc" and version else None


def _nccl_version(torch: Any) -> str | None:
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # CPU builds have no NCCL; the call raises
        return None
    if isinstance(version, tuple):
        return ".".join(str(v) for v in version)
    return runtime.nccl_version(int(version))  # older torch: 2708 or 21803 style integers


def _bf16(torch: Any, index: int) -> bool | None:
    """Whether device ``index`` computes in bf16 natively. is_bf16_supported() asks the
    current device, so it is asked under ``torch.cuda.device(index)``; without emulation
    (torch >= 2.3 counts a V100's emulated bf16 as support by default), else as older torch
    asks; None when torch cannot say."""
    try:
        with torch.cuda.device(index):
            try:
                return bool(torch.cuda.is_bf16_supported(including_emulation=False))
            except TypeError:  # torch before 2.3 has no emulation to leave out
                return bool(torch.cuda.is_bf16_supported())
    except Exception:
        return None


def arch_list(torch: Any) -> list[str]:
    """The architectures torch's kernels were built for (``sm_90``, ``compute_90`` for PTX);
    [] for a CPU build or where CUDA is not available."""
    try:
        return [str(a)[:20] for a in torch.cuda.get_arch_list()][:64]
    except Exception:
        return []


def _device(torch: Any, index: int) -> dict[str, Any]:
    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    return {
        "index": index,
        "name": props.name,
        "capability": "%d.%d" % (props.major, props.minor),
        "total_memory": int(props.total_memory),
        "uuid": str(uuid) if uuid is not None else None,
        "bf16": _bf16(torch, index),
    }


def torch_facts(notes: list[str]) -> dict[str, Any]:
    """What torch says about CUDA, cuDNN, NCCL and the devices; never raises."""
    facts: dict[str, Any] = {
        "torch": None,
        "cuda": None,
        "cuda_available": False,
        "device_count": 0,
        "devices": [],
        "cudnn": None,
        "nccl": None,
        "arch_list": [],
    }
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install raising anything
        notes.append("torch cannot be imported: %s" % (str(exc).splitlines() or ["?"])[0])
        return facts
    facts["torch"] = str(torch.__version__)
    facts["cuda"] = torch.version.cuda
    facts["nccl"] = _nccl_version(torch)
    facts["arch_list"] = arch_list(torch)
    try:
        facts["cudnn"] = (
            str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else None
        )
        facts["cuda_available"] = bool(torch.cuda.is_available())
        if facts["cuda_available"]:
            facts["device_count"] = int(torch.cuda.device_count())
            facts["devices"] = [_device(torch, i) for i in range(facts["device_count"])]
        elif torch.version.cuda is None:
            notes.append("torch %s is a CPU-only build" % torch.__version__)
        else:
            notes.append(
                "torch is built for CUDA %s but CUDA is not available "
                "(no GPU visible, or the driver is missing or too old)" % torch.version.cuda
            )
    except Exception as exc:
        notes.append("CUDA query failed: %s" % (str(exc).splitlines() or ["?"])[0])
    return facts


def collect(use_torch: bool = True, use_runtime: bool = True) -> dict[str, Any]:
    """Every fact this probe reports, as a JSON-ready dict."""
    notes: list[str] = []
    doc: dict[str, Any] = {
        "schema": FACTS,
        "hostname": socket.gethostname(),
        **machine_ids(),
        "python": platform.python_version(),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "os": platform.platform(),
        "machine": platform.machine(),
        "glibc": glibc_version(),
        "driver": driver_version(notes),
        "env": collected_env(dict(os.environ)),
    }
    if use_torch:
        doc.update(torch_facts(notes))
    else:
        notes.append("torch not queried (--no-torch)")
    try:  # after torch: its libraries are mapped by now
        doc["runtime"] = runtime.collect() if use_runtime else None
    except Exception as exc:  # the rest of the facts stand without it
        doc["runtime"] = None
        notes.append("runtime probe failed: %s" % (str(exc).splitlines() or ["?"])[0])
    doc["notes"] = notes
    return doc


def main(argv: list[str] | None = None) -> int:
    """Print the facts; exit 0 whenever the probe could run."""
    args = sys.argv[1:] if argv is None else argv
    unknown = [a for a in args if a not in ("--no-torch", "--no-runtime")]
    if unknown:
        sys.stderr.write("envtool_node.facts: unknown argument %s\n" % unknown[0])
        return 2
    doc = collect(use_torch="--no-torch" not in args, use_runtime="--no-runtime" not in args)
    print(json.dumps(doc, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
