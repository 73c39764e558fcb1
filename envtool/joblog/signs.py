"""What a line of a job's log can be a sign of, and how each counts. Pure.

The signs are listed in precedence order: a CUDA or environment cause first, then what a
log shows of a failure without its cause, then the timeouts (the watchdog's, gloo's), then
the teardown that follows any failure (SIGABRT, an aborted process group, elastic's
restarts, a traceback). The patterns that read a line are in ``patterns``.
"""

from __future__ import annotations

import enum

Detail = tuple[tuple[str, str], ...]  # the values a line names: ("seq", "1"), ("peer", ...)


class Tier(enum.IntEnum):
    """How a sign counts: a cause, a failure without one, a timeout, teardown, context."""

    CAUSE = 0
    FAILURE = 1
    TIMEOUT = 2
    TEARDOWN = 3
    CONTEXT = 4  # not a failure: a line that says what a failure's line does not


class Sign(enum.Enum):
    """A line's meaning, in precedence order (value: its name in reports and JSON)."""

    XID = "gpu-xid"  # the NVIDIA driver's own kernel record (its code weighed: judge/explain)
    ECC = "ecc-uncorrectable"
    NO_KERNEL_IMAGE = "no-kernel-image"
    ARCH_UNSUPPORTED = "arch-unsupported"
    DRIVER_OLD = "driver-too-old"
    SHM = "shm-failed"
    SIGBUS = "sigbus"
    GLOO_LOOPBACK = "gloo-loopback"
    IFNAME = "ifname-not-found"  # NCCL/gloo found no interface of the name it was given
    MISMATCH = "collective-mismatch"
    IB_QP = "ib-qp-failed"
    IB_COMPLETION = "ib-completion-error"
    IB_REG_MR = "ib-reg-mr-enomem"
    SOCKET = "connect-failed"
    CUDA_ERROR = "cuda-error"
    NCCL_WARN = "nccl-warn"
    RAS_DEAD = "ras-process-dead"  # NCCL's RAS: a process considered dead (unreachable)
    RAS_MISSING = "ras-not-responding"  # NCCL's RAS: a process or rank that did not answer
    RAS_ERROR = "ras-rank-error"  # NCCL's RAS: a rank that reported an error
    INIT_INCOMPLETE = "nccl-init-incomplete"  # made at the end of a file, not from one line
    WATCHDOG = "watchdog-timeout"
    GLOO_TIMEOUT = "gloo-timeout"  # gloo's own: a send or recv that timed out
    NCCL_ERROR = "nccl-error"
    GLOO_CLOSED = "gloo-peer-closed"  # gloo: a peer closed its connection (it exited first)
    WATCHDOG_STACK = "watchdog-stack"
    SIGABRT = "sigabrt"
    ABORTED = "process-group-aborted"
    ELASTIC = "elastic-failure"
    EXCEPTION = "exception"
    ARCH_LIST = "arch-list"
    SHM_PATH = "shm-path"
    IB_DEVICE = "ib-device"
    HEADER = "nccl-header"  # what every NCCL process says of itself: compared across hosts
    INIT = "nccl-init"
    INIT_DONE = "nccl-init-complete"
    ELASTIC_RANK = "elastic-rank"  # torchelastic's failure block names a failed rank
    BENIGN = "benign-warn"

    @property
    def tier(self) -> Tier:
        """How this sign counts."""
        return _TIERS[self]

    @property
    def rank(self) -> int:
        """Its place in the precedence (0 first)."""
        return _ORDER[self]


_ORDER = {sign: i for i, sign in enumerate(Sign)}
# fmt: off
_TIERS = {
    **dict.fromkeys((Sign.XID, Sign.ECC, Sign.NO_KERNEL_IMAGE, Sign.ARCH_UNSUPPORTED,
                     Sign.DRIVER_OLD, Sign.SHM, Sign.GLOO_LOOPBACK, Sign.IFNAME, Sign.MISMATCH,
                     Sign.IB_QP, Sign.IB_COMPLETION), Tier.CAUSE),
    **dict.fromkeys((Sign.SIGBUS, Sign.IB_REG_MR, Sign.SOCKET, Sign.CUDA_ERROR,
                     Sign.NCCL_WARN, Sign.RAS_DEAD, Sign.RAS_MISSING, Sign.RAS_ERROR,
                     Sign.INIT_INCOMPLETE), Tier.FAILURE),
    Sign.WATCHDOG: Tier.TIMEOUT,
    Sign.GLOO_TIMEOUT: Tier.TIMEOUT,
    **dict.fromkeys((Sign.NCCL_ERROR, Sign.GLOO_CLOSED, Sign.WATCHDOG_STACK, Sign.SIGABRT,
                     Sign.ABORTED, Sign.ELASTIC, Sign.EXCEPTION), Tier.TEARDOWN),
    **dict.fromkeys((Sign.ARCH_LIST, Sign.SHM_PATH, Sign.IB_DEVICE, Sign.HEADER, Sign.INIT,
                     Sign.INIT_DONE, Sign.ELASTIC_RANK, Sign.BENIGN), Tier.CONTEXT),
}
# fmt: on


# the signs of a rank that was in the collective when it failed: a timeout, or its gloo peer
# closing on it (the ranks with none of them are the ones to look at)
WAITED = frozenset({Sign.WATCHDOG, Sign.GLOO_TIMEOUT, Sign.GLOO_CLOSED})
