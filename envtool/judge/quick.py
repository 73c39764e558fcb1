"""What ``preflight --quick`` judges beyond verify's checks (pure): ``--min-gpus`` against the
GPUs the node read without torch (verify counts torch's devices; the quick mode imports no
torch), and which of the node's GPUs are judged at all: every GPU, a job's in its Prolog
(``--job-gpus``: only the GPUs it was given, the processes on them, their Xid records), or
their health alone as a HealthCheckProgram (``--health``: jobs may be running, so a process
holding a GPU is no fault). In: this node's HostReport; out: Findings and the narrowed report."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from envtool.judge.findings import Finding, Kind
from envtool.judge.gpu_health import SUBJECT_HEALTH
from envtool.judge.gpu_xid import pci_key
from envtool.judge.rules import severity
from envtool.protocol.gpu_types import GpuDevice, GpuLayer
from envtool.protocol.types import HostReport

INDEX = re.compile(r"0|[1-9][0-9]{0,3}")  # NVML's index, as SLURM_JOB_GPUS writes it
UUID = re.compile(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
MAX_GPUS = 1024  # names in one list: more is not a GPU list
OCCUPANCY = frozenset({Kind.GPU_BUSY})  # who holds a GPU, not what state it is in


@dataclass(frozen=True)
class GpuScope:
    """Which GPUs are judged: ``job_gpus`` (() every GPU) and whether a process holding one
    is a finding (``occupancy``; False: a health check)."""

    job_gpus: tuple[str, ...] = ()  # indices or UUIDs, as parse_gpus read them
    occupancy: bool = True


@dataclass(frozen=True)
class Coverage:
    """What the scope left judged: ``judged`` of the ``total`` GPUs the node read."""

    scope: GpuScope
    judged: int
    total: int


def parse_gpus(text: str) -> tuple[str, ...]:
    """``0,3`` or ``GPU-<uuid>,...`` (SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES) → the names;
    ValueError saying why for anything else: an empty name, a range, a MIG instance (not a
    GPU this check can place), a name given twice."""
    names = text.split(",")
    if len(names) > MAX_GPUS:
        raise ValueError(f"more than {MAX_GPUS} GPUs")
    out: list[str] = []
    for name in names:
        if name.upper().startswith("MIG-"):
            raise ValueError(f"{name[:60]!r} is a MIG instance: name its GPU (index or GPU-UUID)")
        if not (INDEX.fullmatch(name) or UUID.fullmatch(name)):
            raise ValueError(f"{name[:60]!r} is no GPU index (0, 1, ...) nor GPU-UUID")
        if name.lower() in (o.lower() for o in out):
            raise ValueError(f"{name!r} is named twice")
        out.append(name)
    return tuple(out)


def _named(dev: GpuDevice, name: str) -> bool:
    """``dev`` is the GPU ``name`` names: its UUID (in any case), else its index."""
    if UUID.fullmatch(name):
        return dev.uuid.lower() == name.lower()
    return str(dev.index) == name


def narrowed(report: HostReport, scope: GpuScope) -> tuple[HostReport, Coverage, list[Finding]]:
    """The report with only what ``scope`` judges in its GPU layer, what that left, and a
    too-few-gpus (the count of the job's GPUs read, as --min-gpus says it) where a GPU of the
    job is not among the node's. A job's view keeps its GPUs, the processes on them, and the
    Xid records of their bus ids or of none the node read (a GPU fallen off the bus may be the
    job's); every other view keeps the whole layer."""
    layer = report.gpus
    if layer is None or layer.source == "none":  # said by probe-failed or gpu_count
        return report, Coverage(scope, 0, 0), []
    total = len(layer.devices)
    if not scope.job_gpus:  # every GPU (a health check's occupancy: in_scope)
        return report, Coverage(scope, total, total), []
    kept = _job_layer(layer, scope.job_gpus)
    judged, found = replace(report, gpus=kept), []
    if any(not any(_named(d, n) for d in layer.devices) for n in scope.job_gpus):
        kind, wanted = Kind.TOO_FEW_GPUS, ",".join(scope.job_gpus)
        found.append(Finding(kind, severity(kind), "GPUs", f"the job's GPUs {wanted} (--job-gpus)",
                             str(len(kept.devices)), (report.host,)))  # fmt: skip
    return judged, Coverage(scope, len(kept.devices), total), found


def in_scope(findings: list[Finding], scope: GpuScope) -> list[Finding]:
    """The findings ``scope`` judges: without occupancy (a health check) no gpu-busy, whether
    the node saw who holds the GPU or only its memory held. The layer keeps its processes
    (a PCIe link below its generation counts only on a GPU in use)."""
    if scope.occupancy:
        return findings
    return [f for f in findings if f.kind not in OCCUPANCY]


def _job_layer(layer: GpuLayer, names: tuple[str, ...]) -> GpuLayer:
    devices = tuple(d for d in layer.devices if any(_named(d, n) for n in names))
    uuids = {d.uuid for d in devices if d.uuid}
    ours = {pci_key(d.pci_bus_id) for d in devices}
    known = {pci_key(d.pci_bus_id) for d in layer.devices} - {None}
    events = tuple(e for e in layer.xid.events
                   if pci_key(e.pci) in ours or pci_key(e.pci) not in known)  # fmt: skip
    return replace(layer, devices=devices, xid=replace(layer.xid, events=events),
                   processes=tuple(p for p in layer.processes if p.gpu_uuid in uuids))  # fmt: skip


def gpu_count(report: HostReport, min_gpus: int, job_gpus: tuple[str, ...] = ()) -> list[Finding]:
    """Fewer GPUs than ``min_gpus`` in the node's GPU layer; a node that read none (no driver)
    says why as not-checked, where GPUs were asked for (``--min-gpus`` or a job's). Nothing
    where the part failed: probe-failed already says so."""
    layer = report.gpus
    if layer is None or (min_gpus == 0 and not job_gpus):
        return []
    host = (report.host,)
    if layer.source == "none":
        asked = f"--job-gpus {','.join(job_gpus)}" if job_gpus else f"--min-gpus {min_gpus}"
        kind, expected = Kind.NOT_CHECKED, f"the GPUs read without torch ({asked})"
        why = layer.why or "the node read no GPU and did not say why"
        return [Finding(kind, severity(kind), SUBJECT_HEALTH, expected, why, host)]
    if len(layer.devices) >= min_gpus:
        return []
    kind = Kind.TOO_FEW_GPUS
    return [Finding(kind, severity(kind), "GPUs", f">= {min_gpus}", str(len(layer.devices)), host)]
