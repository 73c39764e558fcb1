"""One GPU's entry of the ``gpus`` part (envtool.gpus/1), shared by the NVML and the nvidia-smi
readers: every field starts unread, a reader fills what it could read and says why for the rest."""

from __future__ import annotations

from typing import Any

# The fields of a device besides index and "unread", in the contract's order.
FIELDS = (
    "name",
    "uuid",
    "pci_bus_id",
    "memory_total_mib",
    "memory_used_mib",
    "capability",
    "ecc_mode",
    "ecc_uncorrected_volatile",
    "ecc_uncorrected_aggregate",
    "retired_pages_pending",
    "remapped_rows_pending",
    "remapped_rows_failure",
    "pcie_gen_current",
    "pcie_gen_max",
    "pcie_width_current",
    "pcie_width_max",
    "persistence_mode",
    "mig_mode",
    "compute_mode",
    "clock_events",
    "nvlinks",
    "fabric_state",
    "fabric_status",
    "utilization_gpu",
    "pstate",
)
# Clock-event reasons by nvidia-smi's field suffix (clocks_event_reasons.<name>) and NVML's bit
# (nvml.h nvmlClocksEventReason*: GpuIdle 0x1, ApplicationsClocksSetting 0x2, SwPowerCap 0x4,
# HwSlowdown 0x8, SyncBoost 0x10, SwThermalSlowdown 0x20, HwThermalSlowdown 0x40,
# HwPowerBrakeSlowdown 0x80).
CLOCK_EVENTS = (
    ("gpu_idle", 0x1),
    ("applications_clocks_setting", 0x2),
    ("sw_power_cap", 0x4),
    ("hw_slowdown", 0x8),
    ("sync_boost", 0x10),
    ("sw_thermal_slowdown", 0x20),
    ("hw_thermal_slowdown", 0x40),
    ("hw_power_brake_slowdown", 0x80),
)
COMPUTE_MODES = ("Default", "Exclusive_Thread", "Prohibited", "Exclusive_Process")  # NVML 0..3
MAX_TEXT = 200
MAX_INT = 2**62


def blank(index: int) -> dict[str, Any]:
    """A device whose every field is still to be read."""
    device: dict[str, Any] = {"index": index}
    device.update((key, None) for key in FIELDS)
    device["unread"] = {}
    return device


def unreachable(index: int, error: str, pci_bus_id: str | None = None) -> dict[str, Any]:
    """A device the driver lists but cannot open (``GPU is lost``, ``Unknown Error``): its
    ``error`` in the tool's own words, every field unread for that reason."""
    device = blank(index)
    for key in FIELDS:
        set_unread(device, key, error)
    if pci_bus_id:
        device["pci_bus_id"] = visible(pci_bus_id, 40)
        device["unread"].pop("pci_bus_id", None)
    device["error"] = visible(error, 300)
    return device


def visible(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` cut to ``limit`` characters with every control character shown as ``?``."""
    return "".join(c if c.isprintable() else "?" for c in text[:limit])


def set_unread(device: dict[str, Any], key: str, reason: str) -> None:
    """``key`` could not be read: null, and the reason in ``unread``."""
    device[key] = None
    device["unread"][key] = visible(reason)


def settle(device: dict[str, Any]) -> dict[str, Any]:
    """Every field still null without a reason gets one (a reader that never reached it)."""
    for key in FIELDS:
        if device[key] is None and key not in device["unread"]:
            device["unread"][key] = "not read"
    return device
