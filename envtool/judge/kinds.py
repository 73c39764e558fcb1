"""The names a finding is made of: its kind, its severity, the check it belongs to. What each
kind means (its severity, fix, docs row, what it explains away) is the table in judge/rules.py.
"""

from __future__ import annotations

from enum import Enum


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
    """Every kind of finding (judge/rules.py, docs/findings.md)."""

    MISSING = "missing"
    RECORD_UNREADABLE = "record-unreadable"
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
    LOADER_ENV_DIFFERS = "loader-env-differs"
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
    NOT_CHECKED = "not-checked"
    RUNTIME_DIFFERS = "runtime-differs"
    LOADED_OUTSIDE = "loaded-outside-prefix"
    LOADED_TWICE = "library-loaded-twice"
    TWO_TORCHES = "two-torches"
    CUDA_MIXED = "cuda-mixed"
    CUDA_VERSION_MISMATCH = "cuda-version-mismatch"
    TWO_NCCLS = "two-nccls"
    CUDA_STACKS_MIXED = "cuda-stacks-mixed"
    OTHER_PYTHON = "built-for-another-python"
