"""The names a finding is made of: its kind, its severity, the check it belongs to, and the
shape of a kind's rule. What each kind means (its severity, fix, docs row, what it explains
away) is the table of those rules in judge/rules.py.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    NETWORK = "network"  # interfaces, InfiniBand, the rendezvous from every node (issue 28)
    LIMITS = "limits"  # /dev/shm, ulimits, clocks, kernel and glibc (issue 28)


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
    SPEC_UNMET = "spec-unmet"
    DIFFERS_FROM_MAJORITY = "differs-from-majority"
    DIFFERS_BETWEEN_NODES = "differs-between-nodes"
    VERSION_MISMATCH = "version-mismatch"
    SAME_MACHINE = "same-machine"
    GPU_COUNT_DIFFERS = "gpu-count-differs"
    NCCL_ENV_DIFFERS = "nccl-env-differs"
    LOADER_ENV_DIFFERS = "loader-env-differs"
    CUDA_UNAVAILABLE = "cuda-unavailable"
    TOO_FEW_GPUS = "too-few-gpus"
    DRIVER_TOO_OLD = "driver-too-old"
    DRIVER_MINOR_COMPAT = "driver-minor-compat"
    ALLREDUCE_FAILED = "allreduce-failed"
    RDZV_PORT_TAKEN = "rendezvous-port-taken"
    ALLREDUCE_WRONG = "allreduce-wrong"
    BUSBW_LOW = "busbw-low"
    SLOW_NODE = "slow-node"
    SLOW_LINK = "slow-link"
    ALLREDUCE_BELOW_BASELINE = "allreduce-below-baseline"
    GPU_FIGURE_DROPPED = "gpu-figure-dropped"
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
    # the cards under the environment (judge/gpu_health.py, rows in rules_gpu.py)
    GPU_BUSY = "gpu-busy"
    GPU_UNREADABLE = "gpu-unreadable"
    GPU_ARCH_UNSUPPORTED = "gpu-arch-unsupported"
    GPU_ECC = "gpu-ecc-uncorrectable"
    GPU_ROW_REMAP = "gpu-row-remap"
    GPU_RETIRED_PAGES = "gpu-retired-pages-pending"
    GPU_XID = "gpu-xid"
    GPU_XID_APP = "gpu-xid-application"
    GPU_FABRIC = "gpu-fabric-not-ready"
    GPU_NVLINK_DOWN = "gpu-nvlink-down"
    GPU_PCIE_DEGRADED = "gpu-pcie-degraded"
    GPU_MIG = "gpu-mig-enabled"
    GPU_COMPUTE_MODE = "gpu-compute-mode"
    GPU_PERSISTENCE_OFF = "gpu-persistence-off"
    GPU_SLOWDOWN = "gpu-clocks-slowdown"
    GPU_MODEL_DIFFERS = "gpu-model-differs"
    GPU_MEMORY_DIFFERS = "gpu-memory-differs"
    GPU_CAPABILITY_DIFFERS = "gpu-capability-differs"
    GPU_POLICY_UNMET = "gpu-policy-unmet"
    # the network and the limits under the environment (judge/network.py, judge/limits.py,
    # rows in rules_network.py)
    IFNAME_UNMATCHED = "socket-ifname-unmatched"
    MTU_DIFFERS = "mtu-differs"
    LINK_SPEED_DIFFERS = "link-speed-differs"
    IB_PORT_DOWN = "ib-port-down"
    IB_RATE_DIFFERS = "ib-rate-differs"
    IB_HCA_MISSING = "ib-hca-missing"
    PEERMEM_MISSING = "peermem-missing"
    RDZV_UNRESOLVABLE = "rendezvous-unresolvable"
    RDZV_LOOPBACK = "rendezvous-loopback"
    RDZV_ADDRESS_DIFFERS = "rendezvous-address-differs"
    RDZV_UNREACHABLE = "rendezvous-unreachable"
    RDZV_LATE = "rendezvous-late"
    RDZV_STRANGERS = "rendezvous-strangers"
    GLOO_LOOPBACK = "gloo-loopback"
    SHM_SMALL = "shm-small"
    MEMLOCK_LOW = "memlock-low"
    NOFILE_LOW = "nofile-low"
    CLOCK_SKEW = "clock-skew"
    SYSTEM_DIFFERS = "system-differs"
    # what only a failed job's log shows (envtool explain: judge/explain.py, rows in
    # rules_joblog.py)
    COLLECTIVE_TIMEOUT = "collective-timeout"
    COLLECTIVE_MISMATCH = "collective-mismatch"
    IB_QP_ERROR = "ib-qp-error"
    IB_COMPLETION_ERROR = "ib-completion-error"
    CAUSE_NOT_ESTABLISHED = "cause-not-established"


EVERYTHING = frozenset(Kind)  # "explains": every other finding on its hosts


@dataclass(frozen=True)
class Rule:
    """One kind: its check, its severity (``lenient``: for an ordinary package, or when the
    check is not asked for), its cause, the fix line reports print ("": made per finding in
    report/labels.py), the docs' fix, and the kinds it explains away on the same hosts."""

    check: Check
    severity: Severity
    lenient: Severity | None
    cause: str
    fix: str
    docs_fix: str
    explains: frozenset[Kind] = frozenset()
    by_subject: bool = False  # explains only findings about the same subject (a package)
    whole_run: bool = False  # explains them on every host (one run's shared rendezvous)

    @property
    def when(self) -> str:
        """The docs' words for its severity."""
        if self.lenient is Severity.WARNING:
            return "error for what decides a DDP run, else warning"
        if self.lenient is Severity.INFO:
            return "error (info with `--min-gpus 0`)"
        return self.severity.value
