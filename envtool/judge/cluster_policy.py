"""What a site expects of its cluster beyond the lock (``--policy FILE``, read by
envtool/policy.py): the GPUs each node must have, how much a foreign process may hold, what
may be on, and the findings accepted as known differences. Pure data; defaults are what
verify holds every cluster to without a file."""

from __future__ import annotations

from dataclasses import dataclass, field

from envtool.judge.kinds import Kind
from envtool.judge.limits import LimitsPolicy


@dataclass(frozen=True)
class GpuExpect:
    """The ``gpus:`` section: None where the site expects nothing in particular."""

    model: str | None = None  # a case-insensitive part of every GPU's name ("H100")
    count: int | None = None  # GPUs per node, exactly
    memory_mib: int | None = None  # each GPU's total memory as nvidia-smi says it, exactly
    mig_allowed: bool = False
    foreign_memory_mib: int = 0  # MiB per GPU other processes may hold before the run
    persistence_required: bool = True


_UNCHECKED = "it says a check did not run, not a known difference"
_DDP_BROKEN = "it says DDP itself does not work here, not a known difference"
# Never accepted, and why: each says a check did not run or a node's answer could not be
# judged ("known difference" would turn "not checked" into a pass), or that the all-reduce
# itself failed or summed wrong (it would turn a broken DDP run into "all good")
NOT_ACCEPTABLE: dict[Kind, str] = {
    Kind.UNREACHABLE: _UNCHECKED, Kind.ENV_MISSING: _UNCHECKED, Kind.PROBE_FAILED: _UNCHECKED,
    Kind.NOT_CHECKED: _UNCHECKED, Kind.RECORD_UNREADABLE: _UNCHECKED, Kind.RDZV_LATE: _UNCHECKED,
    Kind.ALLREDUCE_FAILED: _DDP_BROKEN, Kind.ALLREDUCE_WRONG: _DDP_BROKEN,
}  # fmt: skip


@dataclass(frozen=True)
class ClusterPolicy:
    """The whole policy file: ``gpus:``, ``limits:`` (judge/limits.py) and ``accept:``."""

    gpus: GpuExpect = GpuExpect()
    limits: LimitsPolicy = field(default_factory=LimitsPolicy)  # shm, ulimit -n, clock skew
    accept: frozenset[Kind] = frozenset()  # known differences: these kinds become info
    # per GPU model and count ("NVIDIA H100 80GB HBM3 x8", "no GPU"): a pinned baseline busbw
    # (GB/s, in place of the fleet's history) and a floor; None where the file sets none
    baselines: tuple[tuple[str, float | None, float | None], ...] = ()
    source: str = ""  # the file it was read from ("": the defaults)
