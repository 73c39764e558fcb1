"""A card's links as the judge reads them (pure): its PCIe width and, under real load (its
utilization and performance state: idle links downshift), its generation; NVLinks down beside
others up; the fabric; the same narrow link on every node as the slots' width by design; and
which health groups a card could not read (said as not checked, judge/unchecked.py)."""

from __future__ import annotations

from dataclasses import replace

from envtool.judge.findings import Finding, Kind, Severity, gpu_indices
from envtool.judge.rules import severity
from envtool.protocol.gpu_types import GpuDevice, GpuLayer

CAUSE_WIDTH, CAUSE_GEN = "width", "generation"


def finding(
    kind: Kind, subject: str, expected: str, actual: str, host: str, cause: str = ""
) -> Finding:
    return Finding(kind, severity(kind), subject, expected, actual, (host,), cause=cause)


def gpu_name(device: GpuDevice) -> str:
    """``GPU 0``: the subject of a finding about one card."""
    return f"GPU {device.index}"


LOADED_PERCENT, LOADED_PSTATES = 10, ("P0", "P1", "P2")  # busy, and clocked up for it


def load(layer: GpuLayer, dev: GpuDevice) -> str:
    """Why the card counts as under real load ("" when it does not): its utilization and
    performance state where it reported both (idle links downshift: a P8 card at 0 % merely
    holding memory is idle); else, from what it held, saying so."""
    util, pstate = dev.utilization_gpu, dev.pstate
    if util is not None and pstate is not None:
        busy = util >= LOADED_PERCENT and pstate in LOADED_PSTATES
        return f"{util}% utilization, {pstate}" if busy else ""
    held = bool(layer.held(dev))
    memory = (dev.memory_used_mib or 0) > 0 and dev.clock_events is not None
    if held or (memory and "gpu_idle" not in (dev.clock_events or ())):
        return "memory held, utilization not read"
    return ""


def in_use(layer: GpuLayer, dev: GpuDevice) -> bool:
    """Under real load (``load``)."""
    return bool(load(layer, dev))


def faults(layer: GpuLayer, dev: GpuDevice, host: str) -> list[Finding]:
    """A card's PCIe link (width; generation under real load), NVLinks down beside others
    up, and its fabric."""
    out, name = [], gpu_name(dev)
    w, wmax, g, gmax = (
        dev.pcie_width_current,
        dev.pcie_width_max,
        dev.pcie_gen_current,
        dev.pcie_gen_max,
    )
    if None not in (w, wmax, g, gmax):
        expected, actual = f"x{wmax} Gen{gmax}", f"x{w} Gen{g}"
        if w is not None and wmax is not None and w < wmax:
            out.append(finding(Kind.GPU_PCIE_DEGRADED, name, expected, actual, host, CAUSE_WIDTH))
        elif g is not None and gmax is not None and g < gmax and (how := load(layer, dev)):
            actual = f"{actual} under load ({how})"
            out.append(finding(Kind.GPU_PCIE_DEGRADED, name, expected, actual, host, CAUSE_GEN))
    links = dev.nvlinks or ()
    down = [str(link.link) for link in links if not link.up]
    if down and len(down) < len(links):
        actual = f"link {', '.join(down)} down of {len(links)}"
        out.append(finding(Kind.GPU_NVLINK_DOWN, name, "every NVLink up", actual, host))
    state, status = dev.fabric_state, dev.fabric_status
    if (state is not None and state != "Completed") or status not in (None, "Success"):
        actual = f"{state or '?'}/{status or '?'}"
        out.append(finding(Kind.GPU_FABRIC, name, "fabric Completed/Success", actual, host))
    return out


CAUSE_BY_DESIGN = "by-design"  # the same narrow link on every node: the slot's width


def by_design(found: list[Finding], hosts: list[str]) -> list[Finding]:
    """A link narrower than its card's maximum the same way on every node with GPUs (two or
    more: an x8/x8 board, a cloud VM's slots) is the slots' width by design, a note; where
    some nodes differ, the narrow ones stay warnings, the odd ones named (nothing is said of
    a slot no node can compare)."""
    width = [f for f in found if f.kind is Kind.GPU_PCIE_DEGRADED and f.cause == CAUSE_WIDTH]
    alike = {(f.expected, f.actual) for f in width}
    on = {h for f in width for h in f.hosts}
    if len(hosts) < 2 or len(alike) != 1 or on != set(hosts):
        return found
    return [replace(f, severity=Severity.INFO, cause=CAUSE_BY_DESIGN) if f in width else f
            for f in found]  # fmt: skip


# what a card's health rests on, by group: a group none of whose fields the card could read is
# not checked on it (row remapping replaced page retirement on A100 and later: either will do)
HEALTH = (
    ("ECC errors", ("ecc_uncorrected_volatile", "ecc_uncorrected_aggregate")),
    ("row remaps or retired pages", ("remapped_rows_pending", "retired_pages_pending")),
    ("PCIe link", ("pcie_width_current",)),
)


def unread_health(layer: GpuLayer) -> list[tuple[str, str, str]]:
    """(group, GPUs, why) of each health group a node's cards could not read (``[N/A]``,
    ``[Unknown Error]``): never a silent pass. ECC counts of a card with ECC off are none to
    read; a card the driver cannot open is its own finding (gpu-unreadable)."""
    out = []
    for group, keys in HEALTH:
        gpus, why = [], ""
        for dev in layer.devices:
            if dev.error or (group == "ECC errors" and dev.ecc_mode is False):
                continue
            if all(getattr(dev, k) is None for k in keys):
                gpus.append(gpu_name(dev))
                why = why or dict(dev.unread).get(keys[0], "")
        if gpus:
            out.append((group, gpu_indices(gpus), why))
    return out
