"""One GPU read through NVML with ctypes: the fields of the gpus part, each from one NVML call;
a call this driver lacks or refuses leaves its field null with the reason.

Signatures and layouts from the NVML API reference (docs.nvidia.com/deploy/nvml-api) and
nvml.h as pynvml (gpuopenanalytics/pynvml pynvml/nvml.py) and nvitop (nvitop/api/libnvml.py)
bind them; each call cites its own below. tests/node/test_nvml_bindings.py checks every
structure, constant and function name here against nvidia-ml-py's own (``pynvml``)."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_char, c_int, c_uint, c_ulonglong, c_void_p
from typing import Any, Callable

from . import gpu_device as dev

Call = Callable[..., "str | None"]
UNCORRECTED, VOLATILE, AGGREGATE = 1, 0, 1  # nvmlMemoryErrorType_t, nvmlEccCounterType_t
ENABLED = 1  # NVML_FEATURE_ENABLED (nvmlEnableState_t), NVML_DEVICE_MIG_ENABLE
# NVML_NVLINK_MAX_LINKS: 36 since NVML 13 (18 before); the loop stops at a device's last link
NVLINK_MAX_LINKS = 36
TEXT_BUFFER = 96  # NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE
FABRIC_STATES = ("Not Supported", "Not Started", "In Progress", "Completed")  # nvml.h 0..3
FABRIC_NOT_SUPPORTED, FABRIC_COMPLETED = 0, 3  # NVML_GPU_FABRIC_STATE_*


class PciInfo(ctypes.Structure):
    """nvmlPciInfo_t (v3): char busIdLegacy[16]; unsigned domain, bus, device, pciDeviceId,
    pciSubSystemId; char busId[32] (NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE)."""

    _fields_ = [("busIdLegacy", c_char * 16), ("domain", c_uint), ("bus", c_uint),
                ("device", c_uint), ("pciDeviceId", c_uint), ("pciSubSystemId", c_uint),
                ("busId", c_char * 32)]  # fmt: skip


class MemoryV2(ctypes.Structure):
    """nvmlMemory_v2_t: unsigned version; unsigned long long total, reserved, free, used
    (version = sizeof | 2 << 24, as nvml.h's nvmlMemory_v2 macro)."""

    _fields_ = [("version", c_uint), ("total", c_ulonglong), ("reserved", c_ulonglong),
                ("free", c_ulonglong), ("used", c_ulonglong)]  # fmt: skip


MEMORY_V2 = ctypes.sizeof(MemoryV2) | 2 << 24  # nvml.h's nvmlMemory_v2


class MemoryV1(ctypes.Structure):
    """nvmlMemory_t: unsigned long long total, free, used."""

    _fields_ = [("total", c_ulonglong), ("free", c_ulonglong), ("used", c_ulonglong)]


class Utilization(ctypes.Structure):
    """nvmlUtilization_t: percent of the last sample period the GPU (and its memory) was busy."""

    _fields_ = [("gpu", c_uint), ("memory", c_uint)]


class FabricInfo(ctypes.Structure):
    """nvmlGpuFabricInfo_t: unsigned char clusterUuid[16] (NVML_GPU_FABRIC_UUID_LEN);
    nvmlReturn_t status; unsigned cliqueId; nvmlGpuFabricState_t state, an unsigned char in
    nvml.h (pynvml binds it as a c_uint: the same offset, with three bytes of padding)."""

    _fields_ = [("clusterUuid", ctypes.c_ubyte * 16), ("status", c_int), ("cliqueId", c_uint),
                ("state", ctypes.c_ubyte)]  # fmt: skip


def _text(call: Call, device: dict[str, Any], key: str, name: str, handle: c_void_p) -> None:
    buf = ctypes.create_string_buffer(TEXT_BUFFER)
    why = call(name, handle, buf, c_uint(len(buf)))
    text = buf.value.decode("utf-8", "replace")
    if why is None and text.isprintable() and 0 < len(text) <= dev.MAX_TEXT:
        device[key] = text
    else:
        dev.set_unread(device, key, why or "%s gave %r" % (name, text[:60]))


def _uints(call: Call, name: str, handle: c_void_p, n: int) -> tuple[list[int], str | None]:
    values = [c_uint(0) for _ in range(n)]
    why = call(name, handle, *(byref(v) for v in values))
    return [v.value for v in values], why


def _one(call: Call, device: dict[str, Any], key: str, name: str, handle: c_void_p,
         convert: Callable[[int], Any] = int) -> None:  # fmt: skip
    values, why = _uints(call, name, handle, 1)
    if why is None:
        device[key] = convert(values[0])
    else:
        dev.set_unread(device, key, why)


def _pci_and_memory(call: Call, device: dict[str, Any], handle: c_void_p) -> None:
    pci = PciInfo()
    why = call("nvmlDeviceGetPciInfo_v3", handle, byref(pci))
    bus = pci.busId.decode("ascii", "replace")
    if why is None and bus.isprintable() and bus:
        device["pci_bus_id"] = bus
    else:
        dev.set_unread(device, "pci_bus_id", why or "nvmlDeviceGetPciInfo_v3 gave no bus id")
    mem2 = MemoryV2(version=MEMORY_V2)
    why = call("nvmlDeviceGetMemoryInfo_v2", handle, byref(mem2))
    mem: Any = mem2
    if why is not None:  # an older driver: v1 counts the reserved memory as used
        mem = MemoryV1()
        why = call("nvmlDeviceGetMemoryInfo", handle, byref(mem))
    for key, value in (("memory_total_mib", mem.total), ("memory_used_mib", mem.used)):
        if why is None:
            device[key] = value // (1024 * 1024)
        else:
            dev.set_unread(device, key, why)


def _capability_and_ecc(call: Call, device: dict[str, Any], handle: c_void_p) -> None:
    major, minor = c_int(0), c_int(0)
    why = call("nvmlDeviceGetCudaComputeCapability", handle, byref(major), byref(minor))
    if why is None:
        device["capability"] = "%d.%d" % (major.value, minor.value)
    else:
        dev.set_unread(device, "capability", why)
    modes, why = _uints(call, "nvmlDeviceGetEccMode", handle, 2)  # current, pending
    if why is None:
        device["ecc_mode"] = modes[0] == ENABLED
    else:
        dev.set_unread(device, "ecc_mode", why)
    for key, counter in (("ecc_uncorrected_volatile", VOLATILE),
                         ("ecc_uncorrected_aggregate", AGGREGATE)):  # fmt: skip
        count = c_ulonglong(0)
        why = call("nvmlDeviceGetTotalEccErrors", handle, c_uint(UNCORRECTED), c_uint(counter),
                   byref(count))  # fmt: skip
        if why is None and count.value <= dev.MAX_INT:
            device[key] = count.value
        else:
            dev.set_unread(device, key, why or "count out of range")


def _pages_and_rows(call: Call, device: dict[str, Any], handle: c_void_p) -> None:
    _one(call, device, "retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus",
         handle, lambda v: v == ENABLED)  # fmt: skip
    rows, why = _uints(call, "nvmlDeviceGetRemappedRows", handle, 4)  # corr, unc, pending, fail
    for key, value in (("remapped_rows_pending", rows[2]), ("remapped_rows_failure", rows[3])):
        if why is None:
            device[key] = value != 0
        else:
            dev.set_unread(device, key, why)


def _links_and_modes(call: Call, device: dict[str, Any], handle: c_void_p) -> None:
    for key, name in (("pcie_gen_current", "nvmlDeviceGetCurrPcieLinkGeneration"),
                      ("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
                      ("pcie_width_current", "nvmlDeviceGetCurrPcieLinkWidth"),
                      ("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth")):  # fmt: skip
        _one(call, device, key, name, handle)
    _one(call, device, "persistence_mode", "nvmlDeviceGetPersistenceMode", handle,
         lambda v: v == ENABLED)  # fmt: skip
    modes, why = _uints(call, "nvmlDeviceGetMigMode", handle, 2)  # current, pending
    if why is None:
        device["mig_mode"] = modes[0] == ENABLED
    else:
        dev.set_unread(device, "mig_mode", why)
    values, why = _uints(call, "nvmlDeviceGetComputeMode", handle, 1)
    if why is None and values[0] < len(dev.COMPUTE_MODES):
        device["compute_mode"] = dev.COMPUTE_MODES[values[0]]
    else:
        dev.set_unread(device, "compute_mode", why or "unknown compute mode %d" % values[0])


def _clocks(call: Call, device: dict[str, Any], handle: c_void_p) -> None:
    bits = c_ulonglong(0)
    why = call("nvmlDeviceGetCurrentClocksEventReasons", handle, byref(bits))
    if why is not None:  # drivers before 535 name it by throttling
        why = call("nvmlDeviceGetCurrentClocksThrottleReasons", handle, byref(bits))
    if why is None:
        device["clock_events"] = [name for name, bit in dev.CLOCK_EVENTS if bits.value & bit]
    else:
        dev.set_unread(device, "clock_events", why)


PSTATE_UNKNOWN = 32  # NVML_PSTATE_UNKNOWN


def _load(call: Call, device: dict[str, Any], handle: c_void_p) -> None:
    """Utilization and performance state: what tells real load from memory merely held."""
    rates = Utilization()
    why = call("nvmlDeviceGetUtilizationRates", handle, byref(rates))
    if why is None:
        device["utilization_gpu"] = int(rates.gpu)
    else:
        dev.set_unread(device, "utilization_gpu", why)
    state = c_uint(PSTATE_UNKNOWN)
    why = call("nvmlDeviceGetPerformanceState", handle, byref(state))
    if why is None and state.value < PSTATE_UNKNOWN:
        device["pstate"] = "P%d" % state.value
    else:
        dev.set_unread(device, "pstate", why or "unknown performance state")


def _nvlinks(call: Call, device: dict[str, Any], handle: c_void_p) -> None:
    links: list[dict[str, Any]] = []
    for link in range(NVLINK_MAX_LINKS):
        active = c_uint(0)
        why = call("nvmlDeviceGetNvLinkState", handle, c_uint(link), byref(active))
        if why is not None:  # past the device's last link, or none at all
            break
        links.append({"link": link, "up": active.value == ENABLED})
    if links:
        device["nvlinks"] = links
    else:
        dev.set_unread(device, "nvlinks", why or "no links")


def _fabric(
    call: Call, error: Callable[[int], str], device: dict[str, Any], handle: c_void_p
) -> None:
    info = FabricInfo()
    why = call("nvmlDeviceGetGpuFabricInfo", handle, byref(info))
    if why is None and info.state >= len(FABRIC_STATES):
        why = "unknown fabric state %d" % info.state
    if why is None and info.state == FABRIC_NOT_SUPPORTED:
        why = "Not Supported"
    if why is not None:
        dev.set_unread(device, "fabric_state", why)
        dev.set_unread(device, "fabric_status", why)
        return
    device["fabric_state"] = FABRIC_STATES[info.state]
    if info.state == FABRIC_COMPLETED:  # the status means something only once Completed
        device["fabric_status"] = "Success" if info.status == 0 else error(info.status)
    else:
        dev.set_unread(device, "fabric_status", "fabric state is %s" % FABRIC_STATES[info.state])


def read(call: Call, error: Callable[[int], str], index: int, handle: c_void_p) -> dict[str, Any]:
    """Device ``index`` (its handle got) as an entry of the gpus part."""
    device = dev.blank(index)
    _text(call, device, "name", "nvmlDeviceGetName", handle)
    _text(call, device, "uuid", "nvmlDeviceGetUUID", handle)
    for part in (_pci_and_memory, _capability_and_ecc, _pages_and_rows, _links_and_modes,
                 _clocks, _load, _nvlinks):  # fmt: skip
        part(call, device, handle)
    _fabric(call, error, device, handle)
    return dev.settle(device)
