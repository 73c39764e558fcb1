"""The doctor steps about the machine under the environment: its GPUs as the node reads them
without torch (judge/gpu_health.py), and its network and limits (judge/network.py,
judge/limits.py): NCCL_SOCKET_IFNAME resolved, /dev/shm, ulimits. The facts come from the
node package's collectors run in this process (cluster/here.py), once for both steps."""

from __future__ import annotations

from envtool.doctor.steps import FAIL, PASS, TROUBLE, WARN, Step
from envtool.judge.findings import Finding, Severity
from envtool.protocol.gpu_types import GpuLayer
from envtool.protocol.types import HostReport
from envtool.report.labels import words

PARTS = ("gpus", "limits", "network")


def this_machine() -> HostReport:
    """This machine's GPU, limits and network parts (no torch, no environment needed)."""
    from envtool.cluster import here

    return here.report(None, PARTS)


def _failed(report: HostReport, part: str) -> str:
    return "; ".join(f"{p.part}: {p.detail}" for p in report.problems if p.part == part)


def _judged(name: str, findings: list[Finding], passed: str) -> Step:
    """FAIL on an error, WARN on a warning (their words and the first fix), else PASS."""
    worst = [f for f in findings if f.severity is Severity.ERROR] or [
        f for f in findings if f.severity is Severity.WARNING
    ]
    if not worst:
        return Step(name, PASS, passed)
    said = [words(f) for f in worst]
    summary = "; ".join(
        f"{f.kind.value} {f.subject}: {w.actual}"
        + (f" (expected {w.expected})" if w.expected else "")
        for f, w in zip(worst, said, strict=True)
    )
    status = FAIL if worst[0].severity is Severity.ERROR else WARN
    return Step(name, status, summary, said[0].fix)


def gpus(report: HostReport, min_gpus: int) -> Step:
    """The GPUs read without torch (NVML, else nvidia-smi), judged card by card: foreign
    processes, ECC, remaps, Xids, PCIe, MIG, modes, slowdowns; ``--min-gpus`` counted."""
    from envtool.judge import gpu_health, quick
    from envtool.judge.cluster_policy import GpuExpect

    layer = report.gpus
    if layer is None:
        why = _failed(report, "gpus") or "the node sent no GPU part"
        return Step("gpus", FAIL, f"could not read the GPUs: {why}", f"see {TROUBLE}")
    if layer.source == "none" and min_gpus == 0:
        return Step("gpus", PASS, f"not checked: {layer.why}; no GPU required (--min-gpus 0)")
    findings = quick.gpu_count(report, min_gpus) + gpu_health.node(report, GpuExpect())
    names = sorted({d.name for d in layer.devices}) or ["no GPU"]
    driver = f", driver {layer.driver}" if layer.driver else ""
    passed = (
        f"{len(layer.devices)} x {', '.join(names)}{driver} (read by {layer.source}): no other "
        "process holds them; no ECC, remap, Xid, PCIe, MIG, mode or slowdown finding"
    )
    return _judged("gpus", findings, passed + _xid_log(layer))


def _xid_log(layer: GpuLayer) -> str:
    """What the kernel log's read leaves unsaid: not read, read in part, or records that
    name the driver without being its own (ignored: text anyone can have the kernel print)."""
    xid = layer.xid
    if layer.devices and not xid.read:  # no Xid finding because none could be read
        return f" (Xid log not read: {xid.why or 'no reason given'})"
    said = [f"read in part: {xid.partial}"] if xid.read and xid.partial else []
    if xid.ignored:
        said.append(f"{xid.ignored} ignored: they name the driver but are not its records")
    return f" (Xid log {xid.source or '?'}: {'; '.join(said)})" if said else ""


def _count(value: int) -> str:
    return "unlimited" if value < 0 else str(value)


def _mib(value: int) -> str:
    return "unlimited" if value < 0 else f"{value / 2**20:.0f} MiB"


def network(report: HostReport) -> Step:
    """The interface NCCL would use (NCCL_SOCKET_IFNAME resolved with NCCL's syntax), IB
    ports, /dev/shm and the ulimits, judged as verify judges each node."""
    from envtool.judge import limits, network

    net, lim = report.network, report.limits
    if net is None or lim is None:
        why = _failed(report, "network") or _failed(report, "limits") or "no network part"
        return Step("network", FAIL, f"could not read them: {why}", f"see {TROUBLE}")
    findings = network.check([report]) + limits.check([report], limits.LimitsPolicy())
    nccl = net.nccl
    picked = nccl.selected if nccl is not None else ()
    chosen = ", ".join(picked[:3]) + (f" and {len(picked) - 3} more" if len(picked) > 3 else "")
    by_name = {i.name: i for i in net.interfaces}
    first = by_name.get(nccl.selected[0]) if nccl is not None and nccl.selected else None
    link = f" (MTU {first.mtu})" if first is not None and first.mtu else ""
    how = f"{nccl.variable}={nccl.value}" if nccl is not None and nccl.value else "NCCL's default"
    shm = f"{lim.shm_bytes / 2**30:.1f} GiB" if lim.shm_bytes is not None else "unknown"
    passed = (
        f"{how} selects {chosen or 'none'}{link}; /dev/shm {shm}; "
        f"ulimit -n {_count(lim.nofile[0])}, ulimit -l {_mib(lim.memlock[0])}"
    )
    return _judged("network", findings, passed)
