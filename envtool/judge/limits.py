"""Pure checks of the limits under the environment: /dev/shm's size, the locked-memory limit
where InfiniBand is present, the open-files limit, each node's clock against envtool's, and
the kernel and C library between nodes. Findings carry the numbers compared (bytes, counts,
seconds); report/limit_labels.py words them.

The default thresholds, and why:
- /dev/shm at least 1 GiB: NCCL's SHM transport and torch's DataLoader workers put their
  buffers there; NVIDIA's container guidance runs NCCL with ``--shm-size=1g --ulimit
  memlock=-1``, and Docker's default of 64 MiB makes NCCL fail in ``ncclShmOpen``
  (pytorch/tutorials 0ba3e39 raised its CI's to 2 GB for that).
- memlock unlimited where IB is present: RDMA registers (pins) NCCL's buffers; a limit makes
  ``ibv_reg_mr`` fail (NCCL's troubleshooting guide: raise the pinned-memory limit).
- ulimit -n at least 8192 (soft): torch's default sharing strategy (``file_descriptor``)
  keeps a descriptor open per tensor a DataLoader worker sends, and NCCL's socket transport
  opens sockets per peer and channel; the defaults that run out ("Too many open files") are
  1024 (systemd, Debian, Docker >= 25's containerd) and the 4096 some fixes set; a limit an
  admin raised (20000, 65536, 1048576) is not flagged: no false alarm on a tuned cluster. A
  site that wants more sets ``nofile_min`` in its policy. A warning: a job can raise its soft
  limit itself up to the hard one.
- the clock within 1 s of envtool's: beyond the round trip's bound; torch's timeouts and the
  logs of a multi-node job compare times across nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from envtool.judge.consensus import differences
from envtool.judge.findings import Finding, Kind
from envtool.judge.rules import severity
from envtool.protocol.limit_types import UNLIMITED, Limits
from envtool.protocol.types import HostReport

GiB = 1024**3


@dataclass(frozen=True)
class LimitsPolicy:
    """The thresholds (the policy file's ``limits:`` section can change them)."""

    shm_min_bytes: int = GiB
    nofile_min: int = 8192
    clock_skew_s: float = 1.0


DOCKER_RUN = "docker-run"  # a container envtool started (verify --image): its run options
CONTAINER = "container"  # a running container (verify --container): as it was started


@dataclass(frozen=True)
class Runtime:
    """Who set /dev/shm and the ulimits the probes ran under: ``kind`` "" (the node itself),
    DOCKER_RUN or CONTAINER; for DOCKER_RUN, the docker run option that set each ("": Docker's
    default). A limit the runtime set is its finding (``cause``, the option in ``where``), not
    the image's."""

    kind: str = ""
    shm: str = ""
    memlock: str = ""
    nofile: str = ""


def ib_present(report: HostReport) -> bool:
    """Whether the node's network part shows an InfiniBand/RoCE device (False when it sent
    none: nothing asks for memlock then)."""
    ib = getattr(getattr(report, "network", None), "ib", None)
    return getattr(ib, "present", False) is True


def _below(value: int, floor: int) -> bool:
    return value != UNLIMITED and value < floor


def _one(r: HostReport, lim: Limits, policy: LimitsPolicy, run: Runtime) -> list[Finding]:
    """One node's /dev/shm, memlock and open-files findings (the runtime's where it set them)."""
    found: list[tuple[Kind, str, str, str, str]] = []
    if lim.shm_bytes is not None and lim.shm_bytes < policy.shm_min_bytes:
        found.append((Kind.SHM_SMALL, "/dev/shm", str(policy.shm_min_bytes), str(lim.shm_bytes),
                      run.shm))  # fmt: skip
    if ib_present(r) and lim.memlock[0] != UNLIMITED:
        found.append((Kind.MEMLOCK_LOW, "ulimit -l", str(UNLIMITED), str(lim.memlock[0]),
                      run.memlock))  # fmt: skip
    soft, hard = lim.nofile
    if _below(soft, policy.nofile_min):
        found.append((Kind.NOFILE_LOW, "ulimit -n", str(policy.nofile_min), f"{soft} {hard}",
                      run.nofile))  # fmt: skip
    return [
        Finding(kind, severity(kind), subject, expected, actual, (r.host,), cause=run.kind,
                where=option if run.kind == DOCKER_RUN else "")
        for kind, subject, expected, actual, option in found
    ]  # fmt: skip


def _clock(r: HostReport, policy: LimitsPolicy) -> list[Finding]:
    """A clock further from envtool's than the allowed skew, beyond what the round trip
    leaves unknown."""
    if r.clock_offset is None:
        return []
    offset, bound = r.clock_offset
    if abs(offset) - bound <= policy.clock_skew_s:
        return []
    kind = Kind.CLOCK_SKEW
    return [Finding(kind, severity(kind), "clock", f"{policy.clock_skew_s:g}",
                    f"{offset:+.1f} {bound:.1f}", (r.host,))]  # fmt: skip


def check(
    reports: list[HostReport],
    policy: LimitsPolicy,
    machines: Mapping[str, str] | None = None,
    run: Runtime | None = None,
) -> list[Finding]:
    """Every limits finding over the hosts that sent a limits part (and a clock reading);
    ``run``: the container runtime that set the hosts' /dev/shm and ulimits, if any."""
    out: list[Finding] = []
    limits = {r.host: r.limits for r in reports if r.limits is not None}
    for r in reports:
        if r.limits is not None:
            out += _one(r, r.limits, policy, run or Runtime())
        out += _clock(r, policy)
    kind = Kind.SYSTEM_DIFFERS
    for subject, values in (
        ("kernel", {h: lim.kernel or "unknown" for h, lim in limits.items()}),
        ("glibc", {h: lim.glibc or "not glibc" for h, lim in limits.items()}),
    ):
        out += differences(values, kind, severity(kind), subject, machines=machines)
    return out
