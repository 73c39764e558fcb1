"""The GPUs through NVML (``libnvidia-ml.so.1`` with ctypes), in a forked child that is
abandoned at the deadline: NVML can hang on a dead GPU, and a hung call cannot be interrupted
in the process that made it. The child sends the part's body back as JSON through a pipe.

The sequence (NVML API reference, docs.nvidia.com/deploy/nvml-api): nvmlInit_v2(void);
nvmlSystemGetDriverVersion(char*, unsigned len); nvmlDeviceGetCount_v2(unsigned*);
nvmlDeviceGetHandleByIndex_v2(unsigned, nvmlDevice_t*); the device's fields (nvml_device);
its compute processes; nvmlShutdown(void). Every call returns nvmlReturn_t (0 = success);
nvmlErrorString(nvmlReturn_t) → const char* names a failure."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import time
from ctypes import byref, c_uint, c_ulonglong, c_void_p
from typing import Any

from . import gpu_device, nvml_device
from .gpu_device import visible

LIBRARY = "libnvidia-ml.so.1"
INSUFFICIENT_SIZE = 7  # NVML_ERROR_INSUFFICIENT_SIZE
NOT_AVAILABLE = 2**64 - 1  # NVML_VALUE_NOT_AVAILABLE as an unsigned long long
DRIVER_BUFFER = 80  # NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
MAX_ANSWER = 8 * 1024 * 1024
REAP_S = 1.0  # seconds a killed or finished reader is waited for


class ProcessInfoV2(ctypes.Structure):
    """nvmlProcessInfo_v2_t: unsigned pid; unsigned long long usedGpuMemory; unsigned
    gpuInstanceId, computeInstanceId."""

    _fields_ = [("pid", c_uint), ("usedGpuMemory", c_ulonglong), ("gpuInstanceId", c_uint),
                ("computeInstanceId", c_uint)]  # fmt: skip


class ProcessInfoV3(ctypes.Structure):
    """The v2 layout plus unsigned long long usedGpuCcProtectedMemory: what
    nvmlDeviceGetComputeRunningProcesses_v3 fills on the drivers that export
    nvmlDeviceGetConfComputeMemSizeInfo but not nvmlDeviceGetRunningProcessDetailList
    (nvitop's libnvml.py tells them apart the same way); every other driver fills v2's."""

    _fields_ = [*ProcessInfoV2._fields_, ("usedGpuCcProtectedMemory", c_ulonglong)]


class Nvml:
    """The loaded library: calls by name; a name this driver lacks is a reason, not a crash."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib

    def has(self, name: str) -> bool:
        return hasattr(self.lib, name)

    def error(self, code: int) -> str:
        if self.has("nvmlErrorString"):
            fn = self.lib.nvmlErrorString
            fn.restype = ctypes.c_char_p
            text = fn(c_uint(code))
            if isinstance(text, bytes):
                return visible(text.decode("utf-8", "replace"), 120)
        return "NVML error %d" % code

    def code(self, name: str, *args: Any) -> int | str:
        """The call's nvmlReturn_t, or why it could not be made."""
        if not self.has(name):
            return "%s is not in this driver's NVML" % name
        fn = getattr(self.lib, name)
        fn.restype = ctypes.c_int
        return int(fn(*args))

    def call(self, name: str, *args: Any) -> str | None:
        """None when the call succeeded, else why not (``name: Not Supported``)."""
        code = self.code(name, *args)
        if isinstance(code, str):
            return code
        return None if code == 0 else "%s: %s" % (name, self.error(code))


def processes(nv: Nvml, handle: c_void_p, uuid: str | None) -> list[dict[str, Any]]:
    """The compute processes on a device (v3, else v2); empty when NVML cannot list them."""
    name = "nvmlDeviceGetComputeRunningProcesses_v3"
    info: type[ctypes.Structure] = ProcessInfoV2
    if nv.has("nvmlDeviceGetConfComputeMemSizeInfo") and not nv.has(
        "nvmlDeviceGetRunningProcessDetailList"
    ):
        info = ProcessInfoV3
    if not nv.has(name):
        name, info = "nvmlDeviceGetComputeRunningProcesses_v2", ProcessInfoV2
    count = c_uint(0)
    code = nv.code(name, handle, byref(count), None)
    if code != INSUFFICIENT_SIZE:
        return []  # 0: none; anything else: not listable here
    count.value = count.value * 2 + 8  # room for processes started meanwhile
    array = (info * count.value)()
    if nv.code(name, handle, byref(count), array) != 0:
        return []
    return [{"gpu_uuid": uuid or "", "pid": int(p.pid), "name": None, "user": None,
             "used_mib": None if p.usedGpuMemory == NOT_AVAILABLE else p.usedGpuMemory >> 20}
            for p in array[: count.value]]  # fmt: skip


def _devices(nv: Nvml, body: dict[str, Any]) -> None:
    count = c_uint(0)
    why = nv.call("nvmlDeviceGetCount_v2", byref(count))
    if why is not None:
        body["why"] = why
        return
    for index in range(min(count.value, 64)):
        handle = c_void_p()
        why = nv.call("nvmlDeviceGetHandleByIndex_v2", c_uint(index), byref(handle))
        if why is not None:  # listed but not opened (GPU is lost): it counts, and says so
            body["devices"].append(gpu_device.unreachable(index, why))
            continue
        device = nvml_device.read(nv.call, nv.error, index, handle)
        body["devices"].append(device)
        body["processes"].extend(processes(nv, handle, device["uuid"]))


def body(library: str = LIBRARY) -> dict[str, Any]:
    """The part's body as NVML gives it; ``loaded`` false when the library is not there."""
    try:
        nv = Nvml(ctypes.CDLL(library))
    except OSError as exc:
        return {"loaded": False, "why": visible("%s not loaded: %s" % (library, exc))}
    out: dict[str, Any] = {"loaded": True, "driver": None, "why": None, "devices": [],
                           "processes": []}  # fmt: skip
    why = nv.call("nvmlInit_v2")
    if why is not None:
        out["why"] = why
        return out
    try:
        buf = ctypes.create_string_buffer(DRIVER_BUFFER)
        if nv.call("nvmlSystemGetDriverVersion", buf, c_uint(DRIVER_BUFFER)) is None:
            out["driver"] = visible(buf.value.decode("ascii", "replace"), 40) or None
        _devices(nv, out)
    finally:
        nv.call("nvmlShutdown")
    return out


def _child(write_fd: int, library: str) -> None:
    status = 1
    try:
        # a child left behind (stuck in the driver) holds none of the session's streams
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            answer = body(library)
        except Exception as exc:  # the parent gets a reason, never a traceback
            answer = {"loaded": True, "why": visible("NVML reader failed: %r" % exc)}
        data = json.dumps(answer).encode()
        while data:
            data = data[os.write(write_fd, data) :]
        status = 0
    finally:
        os._exit(status)


def reap(pid: int, seconds: float) -> bool:
    """Wait for child ``pid`` at most ``seconds``; whether it is gone."""
    end = time.monotonic() + seconds
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if done:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.01)


def _answer(read_fd: int, end: float) -> bytes | None:
    """The child's whole answer, or None when it did not come before ``end``."""
    data = bytearray()
    while len(data) <= MAX_ANSWER:
        left = end - time.monotonic()
        if left <= 0 or not select.select([read_fd], [], [], left)[0]:
            return None
        chunk = os.read(read_fd, 65536)
        if not chunk:
            return bytes(data)
        data += chunk
    return None


def read(deadline_s: float, library: str = LIBRARY) -> dict[str, Any]:
    """``body`` from a forked child, or ``why`` when it did not answer within ``deadline_s``."""
    end = time.monotonic() + deadline_s
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(write_fd, library)
    os.close(write_fd)
    try:
        data = _answer(read_fd, end)
    finally:
        os.close(read_fd)
    if data is None or not reap(pid, REAP_S):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        reap(pid, REAP_S)  # a child stuck in the kernel ignores even SIGKILL: then left
    if data is None:
        return {"loaded": True, "why": "NVML did not answer within %g s" % deadline_s}
    try:
        answer = json.loads(data.decode("utf-8"))
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return {"loaded": True, "why": "the NVML reader's answer was not readable"}
    return answer
