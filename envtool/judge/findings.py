"""Findings as data: what kind, how bad, about what, on which hosts; no text for people.

Kinds and severities are enums; ``Check`` groups kinds the way CI reports them (one JUnit
testcase per host and check). The wording of a finding (its expected/actual columns and its
fix line) is made where reports are rendered (envtool/report/labels.py). ``exit_code`` is the
one place findings become an exit code.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import Enum

from envtool.errors import EXIT_OK, EXIT_PROBLEMS
from envtool.models import Package
from envtool.protocol.types import Failure, Problem


class Severity(str, Enum):
    """How bad a finding is; ``rank`` orders them, worst first."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """0 for the worst (error)."""
        return _RANK[self]


_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


class Check(str, Enum):
    """What a group of kinds checks (a JUnit testcase per host and check)."""

    REACHABLE = "reachable"
    LOCK = "lock"
    MAJORITY = "majority"
    GPU = "gpu"
    ALLREDUCE = "allreduce"
    RUNTIME = "runtime"
    CONSISTENCY = "consistency"


class Kind(str, Enum):
    """Every kind of finding (docs/findings.md)."""

    MISSING = "missing"
    EXTRA = "extra"
    VERSION_DIFFERS = "version-differs"
    BUILD_DIFFERS = "build-differs"
    CHANNEL_DIFFERS = "channel-differs"
    MANAGER_DIFFERS = "manager-differs"
    PIP_SHADOWING = "pip-shadowing"
    ARTIFACT_DIFFERS = "artifact-differs"
    DIFFERS_FROM_MAJORITY = "differs-from-majority"
    DIFFERS_BETWEEN_NODES = "differs-between-nodes"
    VERSION_MISMATCH = "version-mismatch"
    GPU_COUNT_DIFFERS = "gpu-count-differs"
    NCCL_ENV_DIFFERS = "nccl-env-differs"
    CUDA_UNAVAILABLE = "cuda-unavailable"
    TOO_FEW_GPUS = "too-few-gpus"
    DRIVER_TOO_OLD = "driver-too-old"
    DRIVER_MINOR_COMPAT = "driver-minor-compat"
    ALLREDUCE_FAILED = "allreduce-failed"
    ALLREDUCE_WRONG = "allreduce-wrong"
    BUSBW_LOW = "busbw-low"
    SLOW_NODE = "slow-node"
    SLOW_LINK = "slow-link"
    UNREACHABLE = "unreachable"
    PROBE_FAILED = "probe-failed"
    ENV_MISSING = "env-missing"
    RUNTIME_DIFFERS = "runtime-differs"
    LOADED_OUTSIDE = "loaded-outside-prefix"
    LOADED_TWICE = "library-loaded-twice"
    TWO_TORCHES = "two-torches"
    CUDA_MIXED = "cuda-mixed"
    CUDA_VERSION_MISMATCH = "cuda-version-mismatch"
    TWO_NCCLS = "two-nccls"
    CUDA_STACKS_MIXED = "cuda-stacks-mixed"
    OTHER_PYTHON = "built-for-another-python"

    @property
    def check(self) -> Check:
        """The check this kind belongs to."""
        return _CHECK_OF[self]


_CHECK_OF = {
    **dict.fromkeys((Kind.UNREACHABLE, Kind.PROBE_FAILED, Kind.ENV_MISSING), Check.REACHABLE),
    **dict.fromkeys(
        (
            Kind.MISSING,
            Kind.EXTRA,
            Kind.VERSION_DIFFERS,
            Kind.BUILD_DIFFERS,
            Kind.CHANNEL_DIFFERS,
            Kind.MANAGER_DIFFERS,
            Kind.PIP_SHADOWING,
            Kind.ARTIFACT_DIFFERS,
        ),
        Check.LOCK,
    ),
    **dict.fromkeys(
        (
            Kind.DIFFERS_FROM_MAJORITY,
            Kind.DIFFERS_BETWEEN_NODES,
            Kind.VERSION_MISMATCH,
            Kind.GPU_COUNT_DIFFERS,
            Kind.NCCL_ENV_DIFFERS,
        ),
        Check.MAJORITY,
    ),
    **dict.fromkeys(
        (Kind.CUDA_UNAVAILABLE, Kind.TOO_FEW_GPUS, Kind.DRIVER_TOO_OLD, Kind.DRIVER_MINOR_COMPAT),
        Check.GPU,
    ),
    **dict.fromkeys(
        (
            Kind.ALLREDUCE_FAILED,
            Kind.ALLREDUCE_WRONG,
            Kind.BUSBW_LOW,
            Kind.SLOW_NODE,
            Kind.SLOW_LINK,
        ),
        Check.ALLREDUCE,
    ),
    **dict.fromkeys((Kind.RUNTIME_DIFFERS, Kind.LOADED_OUTSIDE, Kind.LOADED_TWICE), Check.RUNTIME),
    **dict.fromkeys(
        (
            Kind.TWO_TORCHES,
            Kind.CUDA_MIXED,
            Kind.CUDA_VERSION_MISMATCH,
            Kind.TWO_NCCLS,
            Kind.CUDA_STACKS_MIXED,
            Kind.OTHER_PYTHON,
        ),
        Check.CONSISTENCY,
    ),
}

Spread = tuple[tuple[str, tuple[str, ...]], ...]  # each value and the hosts that have it


@dataclass(frozen=True)
class Finding:
    """One difference or problem.

    ``reference``/``found`` are the packages compared (the lock's or A's, the node's or B's);
    ``failure``/``problem`` what a host or a part of its answer came back as; other findings
    carry the values compared in ``expected``/``actual``. ``spread`` lists the values across
    nodes where no majority exists; ``cause`` tells apart findings of one kind whose fix
    differs; ``where`` is the environment a diff found it in (verify: the hosts say).
    """

    kind: Kind
    severity: Severity
    subject: str  # the package or fact concerned
    expected: str = ""
    actual: str = ""
    hosts: tuple[str, ...] = ()
    reference: Package | None = None
    found: Package | None = None
    spread: Spread = ()
    cause: str = ""
    where: str = ""
    failure: Failure | None = None
    problem: Problem | None = None
    packages: tuple[Package, ...] = ()  # an inconsistency: the packages involved


def worst(findings: Iterable[Finding]) -> Severity | None:
    """The highest severity among findings, None when there are none."""
    return min((f.severity for f in findings), key=lambda s: s.rank, default=None)


def failed(findings: Iterable[Finding], at: Severity = Severity.ERROR) -> bool:
    """Whether any finding is at least as bad as ``at``."""
    level = worst(findings)
    return level is not None and level.rank <= at.rank


def exit_code(findings: Iterable[Finding], fail_at: Severity = Severity.ERROR) -> int:
    """0 when no finding is as bad as ``fail_at``, else 1 (problems found)."""
    return EXIT_PROBLEMS if failed(findings, fail_at) else EXIT_OK


def fold(findings: Iterable[Finding]) -> list[Finding]:
    """Merge findings that differ only by host into one (like clush -b)."""
    merged: dict[Finding, list[str]] = {}
    for f in findings:
        merged.setdefault(replace(f, hosts=()), []).extend(f.hosts)
    return [replace(f, hosts=tuple(sorted(set(hosts)))) for f, hosts in merged.items()]
