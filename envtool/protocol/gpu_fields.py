"""The strict reader of a node document's ``gpus`` part (envtool.gpus/1) into
protocol/gpu_types.py: every value type- and range-checked, every string cut to a length,
anything else ``Malformed`` (that node's problem, never a crash)."""

from __future__ import annotations

import math
import re
from typing import Any

from envtool.protocol.fields import MAX_INT, Malformed, count, listing, mapping, string
from envtool.protocol.gpu_types import GpuDevice, GpuLayer, GpuProcess, NvLink, XidEvent, XidLog

SCHEMA = "envtool.gpus/1"
SOURCES = ("nvml", "nvidia-smi", "none")
MAX_GPUS, MAX_PROCESSES, MAX_XID, MAX_LINKS, MAX_EVENTS = 64, 1024, 512, 64, 32
MAX_MIB = 2**40  # a GPU's memory in MiB beyond this is no measurement


def _optional_int(doc: dict[str, Any], key: str, top: int = MAX_INT) -> int | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise Malformed(f"'{key}' must be an integer or null")
    if not 0 <= value <= top:
        raise Malformed(f"'{key}' is out of range (0 to {top})")
    return value


def _optional_bool(doc: dict[str, Any], key: str) -> bool | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, bool):
        raise Malformed(f"'{key}' must be true, false or null")
    return value


def _strings(value: Any, what: str, most: int) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = listing(value, what)
    if len(items) > most or not all(isinstance(s, str) for s in items):
        raise Malformed(f"{what} must be a list of at most {most} strings")
    return tuple(s[:40] for s in items)


def _nvlinks(value: Any) -> tuple[NvLink, ...] | None:
    if value is None:
        return None
    items = listing(value, "nvlinks")
    if len(items) > MAX_LINKS:
        raise Malformed(f"more than {MAX_LINKS} nvlinks")
    out = []
    for item in items:
        doc = mapping(item, "an nvlink entry")
        up = doc.get("up")
        if not isinstance(up, bool):
            raise Malformed("an nvlink's 'up' must be true or false")
        out.append(NvLink(count(doc, "link"), up))
    return tuple(out)


def _unread(value: Any) -> tuple[tuple[str, str], ...]:
    doc = mapping(value if value is not None else {}, "unread")
    return tuple(sorted((str(k)[:60], str(v)[:200]) for k, v in list(doc.items())[:64]))


def _capability(doc: dict[str, Any]) -> str:
    text = string(doc, "capability", 10) or ""
    major, dot, minor = text.partition(".")
    if text and not (dot and major.isdigit() and minor.isdigit()):
        raise Malformed(f"'capability' {text!r} is not MAJOR.MINOR")
    return text


_MIB = ("memory_total_mib", "memory_used_mib")
_COUNTS = ("ecc_uncorrected_volatile", "ecc_uncorrected_aggregate")
_PCIE = ("pcie_gen_current", "pcie_gen_max", "pcie_width_current", "pcie_width_max")
_FLAGS = ("ecc_mode", "retired_pages_pending", "remapped_rows_pending", "remapped_rows_failure",
          "persistence_mode", "mig_mode")  # fmt: skip


def _pstate(doc: dict[str, Any]) -> str | None:
    """``P0`` .. ``P15`` (None: not read); anything else is Malformed."""
    text = string(doc, "pstate", 4)
    if text is not None and not re.fullmatch(r"P(1[0-5]|[0-9])", text):
        raise Malformed("'pstate' must be P0 to P15")
    return text


def read_device(value: Any) -> GpuDevice:
    """One entry of ``devices``."""
    doc = mapping(value, "a GPU entry")
    ints: dict[str, Any] = {k: _optional_int(doc, k, MAX_MIB) for k in _MIB}
    ints.update({k: _optional_int(doc, k) for k in _COUNTS})
    ints.update({k: _optional_int(doc, k, 64) for k in _PCIE})
    ints["utilization_gpu"] = _optional_int(doc, "utilization_gpu", 100)
    ints.update({k: _optional_bool(doc, k) for k in _FLAGS})
    index = count(doc, "index")
    if index >= MAX_GPUS * 16:
        raise Malformed("'index' is out of range")
    return GpuDevice(
        index=index,
        name=string(doc, "name", 100) or "",
        uuid=string(doc, "uuid", 100) or "",
        pci_bus_id=string(doc, "pci_bus_id", 40) or "",
        capability=_capability(doc),
        compute_mode=string(doc, "compute_mode", 40),
        clock_events=_strings(doc.get("clock_events"), "clock_events", MAX_EVENTS),
        nvlinks=_nvlinks(doc.get("nvlinks")),
        fabric_state=string(doc, "fabric_state", 40),
        fabric_status=string(doc, "fabric_status", 80),
        pstate=_pstate(doc),
        unread=_unread(doc.get("unread")),
        error=string(doc, "error", 300) or "",
        **ints,
    )


def _process(value: Any) -> GpuProcess:
    doc = mapping(value, "a GPU process entry")
    pid = count(doc, "pid")
    if pid > 2**31:
        raise Malformed("'pid' is out of range")
    return GpuProcess(
        string(doc, "gpu_uuid", 100) or "",
        pid,
        string(doc, "name", 200) or "?",
        string(doc, "user", 64),
        _optional_int(doc, "used_mib", MAX_MIB),
    )


def _seconds(doc: dict[str, Any], key: str) -> float | None:
    seconds = doc.get(key)
    if seconds is not None and not (
        isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
        and math.isfinite(seconds) and 0 <= seconds <= MAX_INT
    ):  # fmt: skip
        raise Malformed(f"an Xid event's '{key}' must be a finite number or null")
    return None if seconds is None else float(seconds)


def _event(value: Any) -> XidEvent:
    doc = mapping(value, "an Xid event")
    xid = count(doc, "xid")
    if xid > 100_000:
        raise Malformed("'xid' is out of range")
    records = count(doc, "count", 1)  # absent in a node from before the tally: one record
    if records == 0:
        raise Malformed("an Xid event's 'count' must be at least 1")
    return XidEvent(
        xid, string(doc, "pci", 40) or "", string(doc, "text", 300) or "", _seconds(doc, "seconds"),
        sub=string(doc, "sub", 20) or "", count=records, seq=_optional_int(doc, "seq"),
        first_text=string(doc, "first_text", 300) or "",
        first_seconds=_seconds(doc, "first_seconds"), first_seq=_optional_int(doc, "first_seq"),
    )  # fmt: skip


def _xid(value: Any) -> XidLog:
    if value is None:
        return XidLog(False, "the node sent no Xid part")
    doc = mapping(value, "xid")
    read = doc.get("read")
    if not isinstance(read, bool):
        raise Malformed("xid's 'read' must be true or false")
    events = listing(doc.get("events"), "xid events")[:MAX_XID]
    return XidLog(
        read, string(doc, "why", 300), tuple(_event(e) for e in events),
        source=string(doc, "source", 200) or "", records=count(doc, "records", 0),
        ignored=count(doc, "ignored", 0), dropped=count(doc, "dropped", 0),
        partial=string(doc, "partial", 200),
    )  # fmt: skip


def read_arch_list(value: Any) -> tuple[str, ...]:
    """The facts' ``arch_list`` (torch.cuda.get_arch_list()); absent in an older node: ()."""
    items = listing(value, "arch_list")[:64]
    if not all(isinstance(a, str) for a in items):
        raise Malformed("arch_list must be a list of strings")
    return tuple(a[:20] for a in items)


def read_gpus(value: Any) -> GpuLayer:
    """envtool.gpus/1 → GpuLayer; Malformed when it is not that."""
    doc = mapping(value, "the gpus part")
    if doc.get("schema") != SCHEMA:
        raise Malformed(f"not a {SCHEMA} document")
    source = doc.get("source")
    if source not in SOURCES:
        raise Malformed(f"'source' must be one of {', '.join(SOURCES)}")
    seconds = doc.get("seconds", 0.0)
    if (
        not isinstance(seconds, (int, float))
        or isinstance(seconds, bool)
        or not (math.isfinite(seconds) and 0 <= seconds <= 86400)
    ):
        raise Malformed("'seconds' must be a number from 0 to 86400")
    devices = listing(doc.get("devices"), "devices")
    processes = listing(doc.get("processes"), "processes")
    if len(devices) > MAX_GPUS or len(processes) > MAX_PROCESSES:
        raise Malformed(f"more than {MAX_GPUS} GPUs or {MAX_PROCESSES} processes")
    return GpuLayer(
        str(source),
        string(doc, "driver", 40),
        string(doc, "why", 300),
        float(seconds),
        tuple(read_device(d) for d in devices),
        tuple(_process(p) for p in processes),
        _xid(doc.get("xid")),
    )
