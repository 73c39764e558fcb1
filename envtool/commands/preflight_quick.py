"""``envtool preflight --quick``: this node alone, fast enough for a Slurm ``Prolog`` or
``HealthCheckProgram``: its GPU layer, its package records against the lock and its network
and limits, read in this process by the node package's own code (cluster/here.py) and judged
by verify's judge. No torch is imported, no all-reduce runs, no SLURM_JOB_ID is needed.

``--drain-reason`` prints only the line ``scontrol update ... reason=`` takes (nothing when
the node is healthy). ``--job-gpus`` (a job's Prolog) judges only the job's GPUs and the
processes on them; ``--health`` (a HealthCheckProgram) judges health, not occupancy: what was
left unjudged is said in the report, and on stderr beside the drain reason."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from envtool.cluster import here
from envtool.history import scope
from envtool.history.record import Recording, remember
from envtool.judge import gpu, quick, verdict
from envtool.judge.cluster_policy import ClusterPolicy
from envtool.judge.findings import exit_code
from envtool.lock import stamp
from envtool.models import Environment

if TYPE_CHECKING:
    from envtool.lock.lockfile import Lockfile

UNCHECKED = ("what python loads (--quick imports no torch; verify and preflight do)",)


@dataclass(frozen=True)
class QuickArgs:
    """What ``preflight --quick`` was asked to do."""

    lock_path: Path | None  # None: --no-lock
    prefix: Path | None
    platform: str = "linux-64"
    min_gpus: int = 1
    policy: ClusterPolicy = field(default_factory=ClusterPolicy)
    drain_reason: bool = False
    scope: quick.GpuScope = field(default_factory=quick.GpuScope)
    recording: Recording = field(default_factory=Recording)  # --history, --metrics-file


def _prefix(args: QuickArgs, sources: tuple[str, ...]) -> Path | None:
    """``--prefix``, else the lock's environment by its name in conda's env dirs (else
    $CONDA_PREFIX); with a lock and none found, the first place looked: the node then says
    the environment is missing, as verify's nodes do. None: no lock, no prefix."""
    from envtool.lock import prefixes

    if args.prefix is not None or args.lock_path is None:
        return args.prefix
    name = _env_name(args.lock_path, sources) or "ddp"
    looked = prefixes.candidates(name)
    return next((p for p in looked if (p / "conda-meta").is_dir()), looked[0])


def _env_name(lock_path: Path, sources: tuple[str, ...]) -> str:
    from envtool.errors import InputError
    from envtool.lock import spec

    for source in sources:
        candidate = lock_path.parent / source
        if candidate.name.endswith((".yml", ".yaml")) and candidate.is_file():
            try:
                return spec.read_env(candidate).name
            except InputError:
                return ""
    return ""


def _from_lock(data: Lockfile, source: str, platform: str) -> Environment:
    from envtool.environments import from_lock  # only when the lock is not in the cache

    return from_lock(data, source, platform)


def decide(args: QuickArgs) -> verdict.Verdict:
    """This node read and judged (InputError for a lock that cannot be read)."""
    from envtool.lock import cached

    start = time.monotonic()
    lock: Environment | None = None
    sources: tuple[str, ...] = ()
    if args.lock_path is not None:
        locked = cached.read(args.lock_path, args.platform, _from_lock)
        lock, sources = locked.env, locked.sources
    report = here.report(_prefix(args, sources))
    # verify's judge on the GPUs in scope, with torch's device count left out (min 0: no
    # facts here); then the count of every GPU the node read without torch. The verdict
    # keeps the whole report: the report shows what was read, the findings what was judged.
    judged, coverage, found = quick.narrowed(report, args.scope)
    policy = verdict.Policy(gpu.GpuPolicy(0, gpu.locked_cuda(lock)), "off", args.policy)
    found += quick.in_scope(verdict.decide([judged], lock, policy), args.scope)
    found += quick.gpu_count(report, args.min_gpus, args.scope.job_gpus)
    unchecked = (*UNCHECKED, *left_out(coverage))
    this = stamp.lock_hash(args.lock_path) if args.lock_path is not None else ""
    return verdict.Verdict((report,), tuple(found), str(args.lock_path or ""),
                           time.monotonic() - start, unchecked=unchecked,
                           lock_sha256=this)  # fmt: skip


def left_out(coverage: quick.Coverage) -> tuple[str, ...]:
    """What the GPU scope left unjudged, in words for the report's "not checked" line."""
    scope = coverage.scope
    if not scope.occupancy:
        return ("occupancy (health check: the processes holding a GPU are not judged)",)
    if scope.job_gpus and coverage.judged < coverage.total:
        said = f"GPUs judged: {coverage.judged} of {coverage.total}"
        return (f"the GPUs not the job's ({said}, the job's: {','.join(scope.job_gpus)})",)
    return ()


def run(args: QuickArgs) -> int:
    """1 when any finding is an error: the node should not take the job."""
    from envtool.report import verify as report

    result = decide(args)
    if args.drain_reason:
        from envtool.report import drain

        drain.show(result.findings, result.unchecked[len(UNCHECKED) :])  # the scope's left-out
    else:
        report.show(result, "table", None)
    doc = report.document(result)
    # a job's GPUs, or their health alone: the GPU check made in part (clears no GPU finding)
    partial = ("gpu",) if args.scope.job_gpus or not args.scope.occupancy else ()
    said = remember(args.recording, doc, "preflight --quick", made=scope.checks(doc, partial))
    if said:
        from envtool.report import history_text

        history_text.not_recorded(said)
    return exit_code(result.findings)
