"""What a node reports and what became of each host, as frozen dataclasses (validated data)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from envtool.models import Environment
from envtool.nccl.model import NcclDevice, NcclRow, large_floor, peak_busbw
from envtool.protocol.gpu_types import GpuLayer
from envtool.protocol.limit_types import Limits
from envtool.protocol.net_types import Network
from envtool.protocol.rdzv_types import RendezvousCheck


@dataclass(frozen=True)
class Device:
    """One GPU as torch sees it."""

    index: int
    name: str
    capability: str = ""
    total_memory: int = 0
    uuid: str = ""
    bf16: bool | None = None  # torch.cuda.is_bf16_supported() for it; None: not asked


@dataclass(frozen=True)
class Library:
    """A library a locked package ships (or one shadowing it), mapped into the probe's process."""

    kind: str  # nccl, nccl-net, cudart, cudnn, cudnn-part, cublas, cublaslt, libtorch, libc10
    path: str
    version: str | None = None  # what the library itself reports
    linked_from: str | None = None  # the prefix's own link to it (a softlinked install)


@dataclass(frozen=True)
class NetPlugin:
    """A NCCL network plugin (``libnccl-net*.so``) where NCCL's ``dlopen`` would find it."""

    path: str
    found: str = ""  # LD_LIBRARY_PATH | RUNPATH | PREFIX/lib | ld.so.cache | system


@dataclass(frozen=True)
class Runtime:
    """What the environment's interpreter really loads (envtool_node.runtime)."""

    implementation: str = ""
    executable: str = ""
    sys_prefix: str = ""
    real_prefix: str = ""  # sys.prefix with symlinks resolved
    user_site: str | None = None  # the user site folder, when it is on
    path: tuple[str, ...] = ()  # sys.path, envtool's own folder left out
    torch_file: str | None = None
    torch_real_file: str | None = None  # symlinks resolved
    torch_entry: str | None = None  # the sys.path entry torch was found under
    torch_git: str | None = None
    libraries: tuple[Library, ...] = ()
    net_plugins: tuple[NetPlugin, ...] = ()  # in NCCL's search order

    def mapped(self, kind: str) -> tuple[Library, ...]:
        """The libraries of one kind, in the order they were mapped."""
        return tuple(lib for lib in self.libraries if lib.kind == kind)


@dataclass(frozen=True)
class NodeFacts:
    """The node's GPU facts (envtool.gpu-facts/1)."""

    hostname: str = ""
    python: str = ""
    torch: str | None = None
    cuda: str | None = None
    cuda_available: bool = False
    device_count: int = 0
    devices: tuple[Device, ...] = ()
    driver: str | None = None
    cudnn: str | None = None
    nccl: str | None = None
    glibc: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    runtime: Runtime | None = None  # None: a probe from before the runtime part
    machine_id: str = ""  # /etc/machine-id (32 hex digits), "" when the node sent none
    boot_id: str = ""  # the kernel's id of this boot; with hostname: which machine it is
    arch_list: tuple[str, ...] = ()  # torch.cuda.get_arch_list(): sm_XY, compute_XY (PTX)


@dataclass(frozen=True)
class AllReduceResult:
    """An all-reduce run (envtool.allreduce/1): its rows in nccl-tests' terms, or why none."""

    backend: str
    nranks: int
    rows: tuple[NcclRow, ...] = ()
    devices: tuple[NcclDevice, ...] = ()
    params: tuple[tuple[str, int], ...] = ()  # minbytes, maxbytes, stepfactor, iters, ...
    wrong_total: int = 0
    avg_busbw: float = 0.0
    error: str = ""
    member: bool = False  # a multi-node run's node without rank 0: its result is elsewhere
    cause: str = ""  # why there is no result, where the node could tell (CAUSE_PORT_TAKEN)
    port: int = 0  # the rendezvous port of that cause

    @property
    def peak_busbw(self) -> float | None:
        """Best busbw over the largest sizes run (from 256 MiB, or the sweep's largest)."""
        return peak_busbw(self.rows, large_floor(self.rows))


@dataclass(frozen=True)
class DdpSmoke:
    """The DDP smoke test's result (envtool.ddp-smoke/1)."""

    backend: str
    nranks: int
    ok: bool
    error: str = ""
    checks: tuple[tuple[str, bool], ...] = ()
    grad_max_diff: float = 0.0  # across ranks


class Outcome(str, Enum):
    """What became of one host, from the transport's and the node script's exit codes."""

    ANSWERED = "answered"
    SSH_FAILED = "ssh-failed"
    TIMED_OUT = "timed-out"  # envtool's deadline passed; the transport was stopped
    TIMED_OUT_ON_NODE = "timed-out-on-node"
    KILLED = "killed"
    NO_TEMP_DIR = "no-temp-dir"
    NO_BUNDLE = "no-bundle"
    BUNDLE_UNTRUSTED = "bundle-untrusted"  # the shared --bundle-dir failed the node's checks
    NO_PYTHON = "no-python"
    ENV_MISSING = "env-missing"
    CANNOT_START = "cannot-start"  # the transport's own command could not run
    EXITED = "exited"  # any other non-zero exit
    NO_ANSWER = "no-answer"  # srun: the node's task printed no document
    OVERSIZED = "oversized"  # it printed more than --max-output / the stderr limit: stopped


@dataclass(frozen=True)
class Answer:
    """What one host gave back, as the transport saw it (nothing parsed yet)."""

    host: str
    returncode: int | None  # None: no exit code (stopped at the deadline, never started)
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    outcome: Outcome | None = None  # known to the transport when there is no exit code
    detail: str = ""  # the transport's own words for such an outcome
    started: float = 0.0  # time.time() when the transport started (0: unknown)


@dataclass(frozen=True)
class Failure:
    """Why a host gave no document."""

    outcome: Outcome
    detail: str  # the node's last words on stderr, or the transport's
    returncode: int | None = None
    prefix: str = ""  # ENV_MISSING: the environment looked for


class ProblemKind(str, Enum):
    """Why one part of a node's document is missing."""

    ENV_MISSING = "env-missing"  # the node found no conda environment at the prefix
    INCOMPLETE = "incomplete-install"  # the prefix carries the unfinished-install marker
    FAILED = "failed"  # the node could not make the part (its message says why)
    MALFORMED = "malformed"  # the part is there but fails validation
    UNREADABLE = "unreadable"  # the whole answer is no document (garbage, too big)
    EMPTY = "empty"  # a document with neither an export nor GPU facts


@dataclass(frozen=True)
class Problem:
    """A part of a node's answer that failed or was garbage."""

    part: str  # export | facts | allreduce | answer
    kind: ProblemKind
    detail: str
    prefix: str = ""  # ENV_MISSING: the prefix the node looked at


@dataclass(frozen=True)
class HostReport:
    """Everything known about one host after the fan-out, validated."""

    host: str
    failure: Failure | None = None
    env: Environment | None = None
    facts: NodeFacts | None = None
    allreduce: AllReduceResult | None = None
    seconds: float = 0.0
    problems: tuple[Problem, ...] = ()
    node: str = ""  # the name the node gave itself
    prefix: str = ""  # the environment the node probed (its own words)
    gpus: GpuLayer | None = None  # the cards read without torch; None: the node sent none
    network: Network | None = None  # interfaces and IB ports; None: the node sent none
    rendezvous: RendezvousCheck | None = None  # the rendezvous from this node (reach.py)
    limits: Limits | None = None  # /dev/shm, ulimits, kernel, glibc; None: the node sent none
    clock_offset: tuple[float, float] | None = None  # (node clock - ours, ± bound) in seconds
    started: float = 0.0  # time.time() when its transport started (0: unknown): with seconds,
    # the span on this machine's clock within which everything the node reports happened

    @property
    def ok(self) -> bool:
        """The host answered with a document (parts of it may still have failed)."""
        return self.failure is None


@dataclass(frozen=True)
class PairRun:
    """One pair's all-reduce: rank 0's result, or why there is none."""

    a: str
    b: str
    round: int
    result: AllReduceResult | None
    error: str = ""
    seconds: float = 0.0
    by: str = ""  # the node whose answer carried rank 0's result
    cause: str = ""  # why there is no result, where a node could tell (CAUSE_PORT_TAKEN)
    # the other node's own figure of the same run (its local rank 0's peak busbw): a pair's
    # figure must agree at both ends, no node speaks for the pair alone; None: it sent none
    partner_busbw: float | None = None
    refused: tuple[str, ...] = ()  # the nodes whose figure the judge refused (judge/pairs.py)

    @property
    def partner(self) -> str:
        """The pair's node that did not carry rank 0's result ("" when that is unknown)."""
        return {self.a: self.b, self.b: self.a}.get(self.by, "")


@dataclass(frozen=True)
class PairsRun:
    """Every pair, the rounds it took and the wall time."""

    pairs: tuple[PairRun, ...]
    rounds: int
    seconds: float
