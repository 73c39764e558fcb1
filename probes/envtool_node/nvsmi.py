"""The GPUs as ``nvidia-smi --query-gpu`` and ``--query-compute-apps`` print them (CSV, no
header, no units): the GPU layer's fallback where NVML does not load.

Both queries run at once under one deadline (bounded_run). nvidia-smi writes ``[N/A]``,
``[Not Supported]``, ``[Requested functionality has been deprecated]`` or ``N/A`` for what it
cannot read: that field is null with the text as its reason. A field this nvidia-smi does not
know makes it refuse the whole query (``Field "X" is not a valid field to query.``, exit 2): the
query is asked again without it (clock-event reasons under their older name
``clocks_throttle_reasons.*`` first)."""

from __future__ import annotations

import re
import time
from typing import Any, Callable

from . import gpu_device as dev
from .bounded_run import Ran, run_all
from .schema import digits

Parse = Callable[[str], Any]
FORMAT = "--format=csv,noheader,nounits"
APPS = ("gpu_uuid", "pid", "process_name", "used_gpu_memory")
INVALID = re.compile(r'Field "([^"\n]{1,100})" is not a valid field to query')
EVENTS, THROTTLE = "clocks_event_reasons.", "clocks_throttle_reasons."
MAX_RETRIES = 8


class Garbage(ValueError):
    """A value that is none of the forms the field takes."""


def _int(text: str) -> int:
    if not digits(text) or not 0 <= int(text) <= dev.MAX_INT:
        raise Garbage(text)
    return int(text)


def _choice(*pairs: tuple[str, Any]) -> Parse:
    table = dict(pairs)

    def parse(text: str) -> Any:
        if text not in table:
            raise Garbage(text)
        return table[text]

    return parse


def _text(text: str) -> str:
    if not text.isprintable() or len(text) > dev.MAX_TEXT:
        raise Garbage(text)
    return text


def _capability(text: str) -> str:
    if not re.fullmatch(r"[0-9]{1,3}\.[0-9]{1,3}", text):
        raise Garbage(text)
    return text


_ENABLED = _choice(("Enabled", True), ("Disabled", False))
_YES = _choice(("Yes", True), ("No", False))
_ACTIVE = _choice(("Active", True), ("Not Active", False))
_MODE = _choice(*((m, m) for m in dev.COMPUTE_MODES))
# nvidia-smi field → (device key, parser); clock-event reasons are added below.
GPU_FIELDS: dict[str, tuple[str, Parse]] = {
    "name": ("name", _text),
    "uuid": ("uuid", _text),
    "pci.bus_id": ("pci_bus_id", _text),
    "memory.total": ("memory_total_mib", _int),
    "memory.used": ("memory_used_mib", _int),
    "compute_cap": ("capability", _capability),
    "ecc.mode.current": ("ecc_mode", _ENABLED),
    "ecc.errors.uncorrected.volatile.total": ("ecc_uncorrected_volatile", _int),
    "ecc.errors.uncorrected.aggregate.total": ("ecc_uncorrected_aggregate", _int),
    "retired_pages.pending": ("retired_pages_pending", _YES),
    "remapped_rows.pending": ("remapped_rows_pending", _YES),
    "remapped_rows.failure": ("remapped_rows_failure", _YES),
    "pcie.link.gen.current": ("pcie_gen_current", _int),
    "pcie.link.gen.max": ("pcie_gen_max", _int),
    "pcie.link.width.current": ("pcie_width_current", _int),
    "pcie.link.width.max": ("pcie_width_max", _int),
    "persistence_mode": ("persistence_mode", _ENABLED),
    "mig.mode.current": ("mig_mode", _ENABLED),
    "compute_mode": ("compute_mode", _MODE),
    "fabric.state": ("fabric_state", _text),
    "fabric.status": ("fabric_status", _text),
    "utilization.gpu": ("utilization_gpu", _int),
    "pstate": ("pstate", _text),
}
QUERY = ("index", "driver_version", *GPU_FIELDS, *(EVENTS + n for n, _ in dev.CLOCK_EVENTS))


def unavailable(text: str) -> str | None:
    """nvidia-smi's way of saying a value is not there (the text), else None."""
    if text == "":
        return "empty"
    if text == "N/A" or (text.startswith("[") and text.endswith("]")):
        return text
    return None


def _field(device: dict[str, Any], key: str, parse: Parse, text: str) -> None:
    reason = unavailable(text)
    if reason is not None:
        dev.set_unread(device, key, reason)
        return
    try:
        device[key] = parse(text)
    except Garbage:
        dev.set_unread(device, key, "nvidia-smi printed %r" % text[:60])


def _clock_events(device: dict[str, Any], row: dict[str, str]) -> None:
    active: list[str] = []
    for name, _ in dev.CLOCK_EVENTS:
        text = row.get(EVENTS + name, row.get(THROTTLE + name))
        if text is None:
            continue  # this nvidia-smi does not know the reason: the others still count
        reason = unavailable(text)
        if reason is None and text not in ("Active", "Not Active"):
            reason = "nvidia-smi printed %r" % text[:60]
        if reason is not None:
            dev.set_unread(device, "clock_events", "%s: %s" % (name, reason))
            return
        if _ACTIVE(text):
            active.append(name)
    if not any(k.startswith((EVENTS, THROTTLE)) for k in row):
        dev.set_unread(device, "clock_events", "this nvidia-smi reports no clock-event reasons")
        return
    device["clock_events"] = active


def device_of(row: dict[str, str], position: int, missing: dict[str, str]) -> dict[str, Any]:
    """One ``--query-gpu`` row (field → text) as a device of the gpus part."""
    index_text = row.get("index", "")
    device = dev.blank(int(index_text) if digits(index_text) else position)
    if not digits(index_text):
        device["unread"]["index"] = "nvidia-smi printed %r; the row's position" % index_text[:20]
    for field, (key, parse) in GPU_FIELDS.items():
        if field in row:
            _field(device, key, parse, row[field])
        else:
            dev.set_unread(device, key, missing.get(field, "not asked"))
    _clock_events(device, row)
    dev.set_unread(device, "nvlinks", "nvidia-smi --query-gpu does not report NVLink states")
    return dev.settle(device)


# what nvidia-smi prints in a device's place when the driver lists it but cannot open it:
# "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error", "... for
# GPU0000:07:00.0: GPU is lost.  Reboot the system to recover this GPU" (exit 15)
LOST = re.compile(
    r"Unable to (?:determine|detect) the device handle for GPU ?"
    r"([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?): *(.{1,240})"
)


def devices(text: str, fields: list[str], missing: dict[str, str]) -> list[dict[str, Any]]:
    """Each GPU in the order nvidia-smi printed them: a row, or a device it could not open
    (LOST) in that GPU's place, its bus id and nvidia-smi's own words kept."""
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        lost = LOST.search(line)
        if lost is not None:
            words = "nvidia-smi: " + lost.group(0)
            out.append(dev.unreachable(len(out), words, lost.group(1)))
            continue
        values = line.split(", ")
        if len(values) == len(fields):
            row = dict(zip(fields, (v.strip() for v in values)))
            out.append(device_of(row, len(out), missing))
    return out


def rows(text: str, fields: list[str]) -> list[dict[str, str]]:
    """The lines of ``text`` with exactly one value per field (others are not rows)."""
    out = []
    for line in text.splitlines():
        values = line.split(", ")
        if len(values) == len(fields):
            out.append(dict(zip(fields, (v.strip() for v in values))))
    return out


def process_of(line: str) -> dict[str, Any] | None:
    """One ``--query-compute-apps=gpu_uuid,pid,process_name,used_gpu_memory`` line; the name
    is what lies between the pid and the last value (it may hold ", " itself)."""
    head = line.split(", ", 2)
    if len(head) != 3 or not digits(head[1].strip()):
        return None
    name, sep, memory = head[2].rpartition(", ")
    if not sep:
        return None
    pid = int(head[1].strip())
    if not 0 < pid < 2**31:
        return None
    memory = memory.strip()
    used = int(memory) if digits(memory) and int(memory) <= 2**40 else None
    uuid = head[0].strip()
    return {"gpu_uuid": dev.visible(uuid, 100), "pid": pid, "name": dev.visible(name, 200),
            "user": None, "used_mib": used}  # fmt: skip


def _first_line(ran: Ran) -> str:
    text = ran.out.decode("utf-8", "replace").strip()
    return dev.visible(text.splitlines()[0] if text else "(nothing printed)", 160)


def _failure(ran: Ran) -> str | None:
    if ran.failure is not None:
        return "nvidia-smi %s" % ran.failure
    if ran.rc != 0:
        return "nvidia-smi failed (exit %s): %s" % (ran.rc, _first_line(ran))
    return None


def _retry_fields(ran: Ran, fields: list[str], missing: dict[str, str]) -> list[str] | None:
    """The query without the field this nvidia-smi refused; None when it refused none."""
    found = INVALID.search(ran.out.decode("utf-8", "replace"))
    if ran.rc == 0 or found is None or found.group(1) not in fields:
        return None
    bad = found.group(1)
    if bad.startswith(EVENTS):
        return [THROTTLE + f[len(EVENTS) :] if f.startswith(EVENTS) else f for f in fields]
    missing[bad] = "not known to this nvidia-smi"
    return [f for f in fields if f != bad]


def query(smi: str, deadline_s: float) -> dict[str, Any]:
    """The part's body from nvidia-smi: driver, devices, processes, why."""
    end = time.monotonic() + deadline_s
    fields, missing = list(QUERY), {}  # type: list[str], dict[str, str]
    apps = [smi, "--query-compute-apps=" + ",".join(APPS), FORMAT]
    gpus_ran, apps_ran = run_all([[smi, "--query-gpu=" + ",".join(fields), FORMAT], apps],
                                 deadline_s)  # fmt: skip
    for _ in range(MAX_RETRIES):
        retry = _retry_fields(gpus_ran, fields, missing)
        left = end - time.monotonic()
        if retry is None or left <= 0:
            break
        fields = retry
        gpus_ran = run_all([[smi, "--query-gpu=" + ",".join(fields), FORMAT]], left)[0]
    return _body(gpus_ran, apps_ran, fields, missing, deadline_s)


def _body(
    gpus_ran: Ran, apps_ran: Ran, fields: list[str], missing: dict[str, str], deadline_s: float
) -> dict[str, Any]:
    body: dict[str, Any] = {"driver": None, "why": None, "devices": [], "processes": []}
    text = gpus_ran.out.decode("utf-8", "replace")
    found = rows(text, fields)
    failure = _failure(gpus_ran)
    body["devices"] = devices(text, fields, missing) if gpus_ran.failure is None else []
    if not found:
        body["why"] = failure or (
            "nvidia-smi printed no readable row: %s" % _first_line(gpus_ran)
            if text.strip()
            else None
        )
        return body
    drivers = {r.get("driver_version", "") for r in found}
    driver = drivers.pop() if len(drivers) == 1 else ""
    body["driver"] = driver if re.fullmatch(r"[0-9][0-9.]{0,30}", driver) else None
    processes: list[dict[str, Any]] | None = None
    apps_failure = _failure(apps_ran)
    if apps_failure is None:
        lines = apps_ran.out.decode("utf-8", "replace").splitlines()
        processes = [p for p in map(process_of, lines) if p is not None]
    body["processes"] = processes or []
    body["processes_why"] = apps_failure
    return body
