"""The entries of ``envtool.verify/1`` (protocol/verify_report.py writes and reads them): each
host as the report shows it, its facts, runtime, all-reduce and parts, the findings, the
pairs, and the document itself. Frozen dataclasses, nothing else."""

from __future__ import annotations

from dataclasses import dataclass

from envtool.protocol.gpu_types import GpuLayer
from envtool.protocol.limit_types import Limits
from envtool.protocol.net_types import Network
from envtool.protocol.rdzv_types import RendezvousCheck


@dataclass(frozen=True)
class LibraryEntry:
    """A NCCL/CUDA runtime/cuDNN library mapped into the node's python."""

    kind: str
    path: str
    version: str | None


@dataclass(frozen=True)
class RuntimeEntry:
    """What the node's python really loaded."""

    executable: str
    sys_prefix: str
    user_site: str | None
    torch_file: str | None
    libraries: tuple[LibraryEntry, ...]
    net_plugins: tuple[str, ...]


@dataclass(frozen=True)
class FactsEntry:
    """A host's GPU facts as the report shows them."""

    hostname: str
    python: str
    torch: str | None
    cuda: str | None
    cuda_available: bool
    device_count: int
    devices: tuple[str, ...]
    driver: str | None
    cudnn: str | None
    nccl: str | None
    env: tuple[tuple[str, str], ...]
    notes: tuple[str, ...]
    runtime: RuntimeEntry | None = None


@dataclass(frozen=True)
class AllReduceEntry:
    """A host's all-reduce result as the report shows it."""

    backend: str
    nranks: int
    peak_busbw: float | None  # GB/s, best busbw over the largest sizes run
    wrong_total: int
    error: str | None
    member: bool = False  # across nodes: a node without rank 0, its own figures of the run
    # each size run, ascending: (bytes, its best busbw in GB/s, out-of-place or in-place)
    sizes: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class HostEntry:
    """One host of the report."""

    host: str
    ok: bool
    error: str | None
    seconds: float
    problems: tuple[str, ...]
    packages: int | None
    facts: FactsEntry | None
    allreduce: AllReduceEntry | None
    # the node's parts in their own shapes (protocol/report_parts.py; None: the node sent
    # none, or an older report): the cards read without torch, the network, the limits, the
    # rendezvous from this node, and its clock's offset (offset_s, bound_s)
    gpus: GpuLayer | None = None
    network: Network | None = None
    limits: Limits | None = None
    rendezvous: RendezvousCheck | None = None
    clock_offset: tuple[float, float] | None = None
    stamp: str | None = None  # the sha256 of the lock its prefix's install stamp names


@dataclass(frozen=True)
class FindingEntry:
    """One finding, worded (also the finding of ``envtool.diff/1``)."""

    kind: str
    severity: str
    subject: str
    expected: str
    actual: str
    hint: str
    hosts: tuple[str, ...]
    follows: int = 0  # findings on its hosts that follow from this one (not listed)


@dataclass(frozen=True)
class PairEntry:
    """One pair of ``--allreduce pairs``: its busbw, or why it has none."""

    a: str
    b: str
    round: int
    busbw: float | None  # GB/s over the largest sizes
    error: str | None
    seconds: float
    by: str | None = None  # the node whose answer carried the result (or the failure's cause)
    partner_busbw: float | None = None  # the other node's own figure of the run: the pair's
    # figure is the lower of the two (judge/pairs.py); None: it sent none (an older node)


@dataclass(frozen=True)
class VerifyDocument:
    """The whole report."""

    lockfile: str | None
    seconds: float
    ok: bool
    hosts: tuple[HostEntry, ...]
    findings: tuple[FindingEntry, ...]
    pairs: tuple[PairEntry, ...] = ()  # --allreduce pairs
    rounds: int = 0
    unchecked: tuple[str, ...] = ()  # asked for or expected, not checked by this run (why)
    docker_run: tuple[str, ...] = ()  # --image: the options docker run started each host with
    lock_sha256: str | None = None  # the lock's (a host's stamp is "this lock" when equal)
