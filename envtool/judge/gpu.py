"""Pure checks of GPU facts and all-reduce results across hosts: findings, no I/O, no text."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from envtool.judge import cuda, runtime
from envtool.judge.consensus import differences
from envtool.judge.findings import Finding, Kind
from envtool.judge.rules import severity
from envtool.models import Environment
from envtool.protocol.schemas import CAUSE_PORT_TAKEN
from envtool.protocol.types import AllReduceResult, HostReport, NodeFacts

CAUSE_BASELINE, CAUSE_MIN_BUSBW = "baseline", "min-busbw"
CAUSE_NO_RANK0 = "no-rank0-result"


@dataclass(frozen=True)
class GpuPolicy:
    """What the cluster must satisfy."""

    min_gpus: int = 1
    locked_cuda: str | None = None  # e.g. "11.8", from the lock's cudatoolkit/cuda-version
    min_busbw: float | None = None  # GB/s
    baseline_busbw: float | None = None  # the baseline's median node (one run: its figure)
    tolerance: float = 0.10
    # each node's own figure in a baseline report: a node is held to its own past, never to
    # another node's claim (a liar's report as --baseline fails no honest node)
    baseline_hosts: tuple[tuple[str, float], ...] = ()


def locked_cuda(lock: Environment | None) -> str | None:
    """The CUDA major.minor the lock pins, in any packaging (judge/cuda.py)."""
    return cuda.env_cuda(lock)


def version_tuple(text: str) -> tuple[int, ...]:
    """``535.104.05`` → (535, 104, 5); non-digits ignored."""
    parts = []
    for piece in text.split("."):
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _cuda_checks(host: str, facts: NodeFacts, policy: GpuPolicy) -> list[Finding]:
    out = []
    if not facts.cuda_available:
        level = severity(Kind.CUDA_UNAVAILABLE, ordinary=policy.min_gpus == 0)
        why = "; ".join(facts.notes) or "torch.cuda.is_available() is False"
        out.append(Finding(Kind.CUDA_UNAVAILABLE, level, "CUDA", "available", why, (host,)))
    if facts.device_count < policy.min_gpus:
        expected, actual = f">= {policy.min_gpus}", str(facts.device_count)
        kind = Kind.TOO_FEW_GPUS
        out.append(Finding(kind, severity(kind), "GPUs", expected, actual, (host,)))
    return out


def _driver_checks(host: str, facts: NodeFacts, policy: GpuPolicy) -> list[Finding]:
    floor = cuda.driver_floor(policy.locked_cuda)
    if floor is None or facts.driver is None:
        return []
    minimum, full = floor
    have = version_tuple(facts.driver)
    if have < version_tuple(minimum):
        expected = f">= {minimum} for CUDA {policy.locked_cuda}"
        kind = Kind.DRIVER_TOO_OLD
    elif full is not None and have < version_tuple(full):
        expected = f">= {full} for full CUDA {policy.locked_cuda} support"
        kind = Kind.DRIVER_MINOR_COMPAT
    else:
        return []
    return [Finding(kind, severity(kind), "driver", expected, facts.driver, (host,))]


# The runtime facts compared across nodes, and the packages that decide each (a package
# finding on a host already explains that host's difference: one cause, one finding).
FACTS: tuple[tuple[str, Callable[[NodeFacts], object], tuple[str, ...]], ...] = (
    ("torch", lambda f: f.torch, ("torch",)),
    ("torch CUDA", lambda f: f.cuda, ("torch",)),
    ("cuDNN", lambda f: f.cudnn, ("cudnn", "nvidia-cudnn")),
    ("NCCL", lambda f: f.nccl, ("nccl", "nvidia-nccl")),
    ("python", lambda f: f.python, ("python",)),
    ("NCCL net plugin", runtime.plugins, ()),  # a plugin on some nodes only hangs NCCL
)


LOADER_VARIABLES = ("LD_LIBRARY_PATH", "LD_PRELOAD")  # which library file a rank loads


def _env_checks(facts: dict[str, NodeFacts], machines: Mapping[str, str]) -> list[Finding]:
    names = sorted({k for f in facts.values() for k, _ in f.env if k.startswith("NCCL_")})
    out: list[Finding] = []
    for name in [*names, *LOADER_VARIABLES]:
        kind = Kind.LOADER_ENV_DIFFERS if name in LOADER_VARIABLES else Kind.NCCL_ENV_DIFFERS
        values = {h: dict(f.env).get(name, "(unset)") for h, f in facts.items()}
        out += differences(values, kind, severity(kind), name, machines=machines)
    return out


def _busbw_floor(policy: GpuPolicy, host: str = "") -> tuple[float, str, str] | None:
    """The busbw a node must reach, how it was set, and its source: ``host``'s own figure in
    the baseline where it has one, else the baseline's median node."""
    floors = []
    if policy.min_busbw is not None:
        floors.append((policy.min_busbw, "--min-busbw", CAUSE_MIN_BUSBW))
    own = dict(policy.baseline_hosts).get(host)
    base = own if own is not None else policy.baseline_busbw
    if base is not None:
        whose = f"{host}'s " if own is not None else ""
        label = f"{whose}baseline {base:.2f} - {policy.tolerance:.0%}"
        floors.append((base * (1 - policy.tolerance), label, CAUSE_BASELINE))
    return max(floors) if floors else None


def port_taken(subject: str, ar: AllReduceResult, host: str) -> Finding:
    """The rendezvous port held by another process on ``host`` (it explains the run's, or
    the pair's, failures on every node: rules.py)."""
    kind = Kind.RDZV_PORT_TAKEN
    port = f"port {ar.port}" if ar.port else "its port"
    return Finding(kind, severity(kind), subject, f"{port} free for envtool's store", ar.error,
                   (host,))  # fmt: skip


def _allreduce_checks(report: HostReport, policy: GpuPolicy) -> list[Finding]:
    ar, host = report.allreduce, (report.host,)
    if ar is None or ar.member:
        return []
    if ar.cause == CAUSE_PORT_TAKEN:
        return [port_taken("all-reduce", ar, report.host)]
    if ar.error:
        return [
            Finding(
                Kind.ALLREDUCE_FAILED,
                severity(Kind.ALLREDUCE_FAILED),
                "all-reduce",
                "completes",
                ar.error,
                host,
            )
        ]
    out = []
    if ar.wrong_total:
        wrong = str(ar.wrong_total)
        out.append(
            Finding(
                Kind.ALLREDUCE_WRONG,
                severity(Kind.ALLREDUCE_WRONG),
                "all-reduce",
                "#wrong 0",
                wrong,
                host,
            )
        )
    floor = _busbw_floor(policy, report.host)
    peak = ar.peak_busbw
    if floor is not None and peak is not None and peak < floor[0]:
        expected, actual = f">= {floor[0]:.2f} GB/s ({floor[1]})", f"{peak:.2f} GB/s"
        out.append(
            Finding(
                Kind.BUSBW_LOW,
                severity(Kind.BUSBW_LOW),
                "busbw",
                expected,
                actual,
                host,
                cause=floor[2],
            )
        )
    return out


def check(
    reports: list[HostReport], policy: GpuPolicy, machines: Mapping[str, str] | None = None
) -> list[Finding]:
    """GPU, driver, NCCL-variable and all-reduce findings across the reachable hosts
    (``machines``: names of one machine, which counts once in a majority)."""
    machines = machines or {}
    facts = {r.host: r.facts for r in reports if r.facts is not None}
    out: list[Finding] = []
    for host, f in facts.items():
        out += _cuda_checks(host, f, policy) + _driver_checks(host, f, policy)
    for subject, get, _ in FACTS:
        values = {h: str(get(f)) for h, f in facts.items()}
        level = severity(Kind.VERSION_MISMATCH)
        out += differences(values, Kind.VERSION_MISMATCH, level, subject, machines=machines)
    counts = {h: str(f.device_count) for h, f in facts.items()}
    level = severity(Kind.GPU_COUNT_DIFFERS)
    out += differences(counts, Kind.GPU_COUNT_DIFFERS, level, "GPUs", machines=machines)
    out += _env_checks(facts, machines)
    for report in reports:
        out += _allreduce_checks(report, policy)
    return out
