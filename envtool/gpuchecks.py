"""Pure checks of GPU facts and all-reduce results across hosts: no I/O."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from envtool.models import Finding, HostReport, NodeFacts

ERROR, WARNING, INFO = "error", "warning", "info"
# (minimum with minor-version compatibility, full support) per CUDA major.minor (FACTS.md).
DRIVER_MINIMUMS = {"11.8": ("450.80.02", "520.61.05")}


@dataclass(frozen=True)
class GpuPolicy:
    """What the cluster must satisfy."""

    min_gpus: int = 1
    locked_cuda: str | None = None  # e.g. "11.8", from the lock's cudatoolkit/cuda-version
    min_busbw: float | None = None  # GB/s
    baseline_busbw: float | None = None
    tolerance: float = 0.10


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _cuda_checks(host: str, facts: NodeFacts, policy: GpuPolicy) -> list[Finding]:
    out = []
    if not facts.cuda_available:
        severity = ERROR if policy.min_gpus > 0 else INFO
        why = "; ".join(facts.notes) or "torch.cuda.is_available() is False"
        out.append(
            Finding(
                "cuda-unavailable",
                severity,
                "CUDA",
                "available",
                why,
                "see docs: CUDA not available (driver, CUDA_VISIBLE_DEVICES, build)",
                (host,),
            )
        )
    if facts.device_count < policy.min_gpus:
        out.append(
            Finding(
                "too-few-gpus",
                ERROR,
                "GPUs",
                f">= {policy.min_gpus}",
                str(facts.device_count),
                "check CUDA_VISIBLE_DEVICES and nvidia-smi",
                (host,),
            )
        )
    return out


def _driver_checks(host: str, facts: NodeFacts, policy: GpuPolicy) -> list[Finding]:
    if policy.locked_cuda not in DRIVER_MINIMUMS or facts.driver is None:
        return []
    minimum, full = DRIVER_MINIMUMS[policy.locked_cuda]
    have = _version_tuple(facts.driver)
    if have < _version_tuple(minimum):
        return [
            Finding(
                "driver-too-old",
                ERROR,
                "driver",
                f">= {minimum} for CUDA {policy.locked_cuda}",
                facts.driver,
                "upgrade the NVIDIA driver",
                (host,),
            )
        ]
    if have < _version_tuple(full):
        return [
            Finding(
                "driver-minor-compat",
                WARNING,
                "driver",
                f">= {full} for full CUDA {policy.locked_cuda} support",
                facts.driver,
                "works through minor-version compatibility; upgrade for full support",
                (host,),
            )
        ]
    return []


_FIELDS: tuple[tuple[str, Callable[[NodeFacts], object]], ...] = (
    ("torch", lambda f: f.torch),
    ("torch CUDA", lambda f: f.cuda),
    ("cuDNN", lambda f: f.cudnn),
    ("NCCL", lambda f: f.nccl),
    ("python", lambda f: f.python),
)


def _majority(
    facts: dict[str, NodeFacts],
    subject: str,
    get: Callable[[NodeFacts], object],
    severity: str,
    kind: str,
) -> list[Finding]:
    values = {h: str(get(f)) for h, f in facts.items()}
    if len(set(values.values())) <= 1:
        return []
    common = Counter(values.values()).most_common(1)[0][0]
    return [
        Finding(kind, severity, subject, common, v, f"make {subject} match the other nodes", (h,))
        for h, v in values.items()
        if v != common
    ]


def _env_checks(facts: dict[str, NodeFacts]) -> list[Finding]:
    names = sorted({k for f in facts.values() for k, _ in f.env if k.startswith("NCCL_")})
    out: list[Finding] = []
    for name in names:
        out += _majority(facts, name, _env_getter(name), WARNING, "nccl-env-differs")
    return out


def _env_getter(name: str) -> Callable[[NodeFacts], object]:
    return lambda f: dict(f.env).get(name, "(unset)")


def _allreduce_checks(report: HostReport, policy: GpuPolicy) -> list[Finding]:
    ar, host = report.allreduce, (report.host,)
    if ar is None or ar.member:
        return []
    if ar.error:
        return [
            Finding(
                "allreduce-failed",
                ERROR,
                "all-reduce",
                "completes",
                ar.error,
                "see docs: blocked MASTER_PORT, wrong interface (NCCL_SOCKET_IFNAME)",
                host,
            )
        ]
    out = []
    if ar.wrong_total:
        out.append(
            Finding(
                "allreduce-wrong",
                ERROR,
                "all-reduce",
                "#wrong 0",
                str(ar.wrong_total),
                "results are corrupted: check GPUs, NCCL version and P2P",
                host,
            )
        )
    floor, label = _busbw_floor(policy)
    if floor is not None and ar.peak_busbw is not None and ar.peak_busbw < floor:
        out.append(
            Finding(
                "busbw-low",
                ERROR,
                "busbw",
                f">= {floor:.2f} GB/s ({label})",
                f"{ar.peak_busbw:.2f} GB/s",
                "check NVLink/IB, NCCL_* variables",
                host,
            )
        )
    return out


def _busbw_floor(policy: GpuPolicy) -> tuple[float | None, str]:
    floors = []
    if policy.min_busbw is not None:
        floors.append((policy.min_busbw, "--min-busbw"))
    if policy.baseline_busbw is not None:
        floors.append(
            (
                policy.baseline_busbw * (1 - policy.tolerance),
                f"baseline {policy.baseline_busbw:.2f} - {policy.tolerance:.0%}",
            )
        )
    return max(floors) if floors else (None, "")


def check(reports: list[HostReport], policy: GpuPolicy) -> list[Finding]:
    """GPU, driver, NCCL-variable and all-reduce findings across the reachable hosts."""
    facts = {r.host: r.facts for r in reports if r.facts is not None}
    out: list[Finding] = []
    for host, f in facts.items():
        out += _cuda_checks(host, f, policy) + _driver_checks(host, f, policy)
    for subject, get in _FIELDS:
        out += _majority(facts, subject, get, ERROR, "version-mismatch")
    out += _majority(facts, "GPUs", lambda f: f.device_count, WARNING, "gpu-count-differs")
    out += _env_checks(facts)
    for report in reports:
        out += _allreduce_checks(report, policy)
    return out
