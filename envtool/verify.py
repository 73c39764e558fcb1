"""``envtool verify``: probe every host, then decide (pure) what differs, then report."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from envtool import drift, envread, gpuchecks, lockfile, probes, remote, yamlio
from envtool.errors import InputError
from envtool.hosts import Host
from envtool.models import Environment, Finding, HostReport

ALLREDUCE_MODES = ("off", "node", "cluster")
DEFAULT_RDZV_PORT = 29400  # torchrun's c10d default


@dataclass(frozen=True)
class VerifyOptions:
    """What ``envtool verify`` was asked to do."""

    hosts: tuple[Host, ...]
    lock_path: Path | None
    platform: str = "linux-64"
    fanout: remote.FanoutOptions = field(default_factory=remote.FanoutOptions)
    allreduce: str = "off"
    allreduce_args: tuple[str, ...] = ()
    min_gpus: int = 1
    min_busbw: float | None = None
    baseline: Path | None = None
    tolerance: float = 0.10
    rdzv_endpoint: str = ""


@dataclass(frozen=True)
class VerifyResult:
    """The reports of every host and the findings over them."""

    reports: tuple[HostReport, ...]
    findings: tuple[Finding, ...]
    lock_path: str
    seconds: float


def locked_cuda(lock: Environment | None) -> str | None:
    """The CUDA major.minor the lock pins (cudatoolkit or cuda-version), if any."""
    if lock is None:
        return None
    for pkg in lock.packages:
        if pkg.name in ("cudatoolkit", "cuda-version"):
            return ".".join(pkg.version.split(".")[:2])
    return None


def baseline_busbw(path: Path) -> float:
    """The peak busbw of an earlier envtool JSON report, or of an nccl-tests log."""
    from envtool import nccl

    text = yamlio.read_text(path, "baseline")
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
            values = [
                h["allreduce"]["peak_busbw"]
                for h in doc["hosts"]
                if (h.get("allreduce") or {}).get("peak_busbw") is not None
            ]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise InputError(f"{path}: not an envtool verify JSON report") from None
        if not values:
            raise InputError(f"{path}: the report holds no all-reduce result")
        return float(max(values))
    run = nccl.parse(text, str(path))
    peak = nccl.peak_busbw(run, min_bytes=0)
    if peak is None:
        raise InputError(f"{path}: no rows to take a baseline from")
    return peak


def _node_args(options: VerifyOptions) -> tuple[str, ...]:
    timeout = ("--timeout", str(max(1, int(options.fanout.timeout - 10))))
    if options.allreduce == "node":
        return ("--allreduce", *options.allreduce_args, *timeout)
    if options.allreduce == "cluster":
        endpoint = options.rdzv_endpoint or f"{options.hosts[0].name}:{DEFAULT_RDZV_PORT}"
        return (
            "--allreduce",
            *options.allreduce_args,
            *timeout,
            "--nnodes",
            str(len(options.hosts)),
            "--rdzv-endpoint",
            endpoint,
            "--rdzv-id",
            f"envtool-{uuid.uuid4().hex[:12]}",
        )
    return ()


def _cluster_result(reports: list[HostReport], options: VerifyOptions) -> list[Finding]:
    """A cross-node run has one result (rank 0's node); none at all is a failure."""
    if options.allreduce != "cluster":
        return []
    ran = [r for r in reports if r.allreduce is not None]
    if any(not r.allreduce.member for r in ran if r.allreduce is not None):
        return []
    return [
        Finding(
            "allreduce-failed",
            "error",
            "all-reduce",
            "a result from rank 0",
            "no node reported one",
            "check the rendezvous endpoint and ports",
            tuple(r.host for r in reports),
        )
    ]


def decide(
    reports: list[HostReport], lock: Environment | None, options: VerifyOptions
) -> list[Finding]:
    """Every finding over the hosts' reports (pure)."""
    findings: list[Finding] = []
    for r in reports:
        if not r.ok and "no conda environment at" in r.error:
            r = replace(r, problems=(r.error.split(": ", 1)[-1], *r.problems))
        elif not r.ok:
            findings.append(
                Finding(
                    "unreachable",
                    "error",
                    "host",
                    "answers",
                    r.error,
                    "check ssh access, the node and --timeout",
                    (r.host,),
                )
            )
        for problem in r.problems:
            part = problem.split(":", 1)[0]
            if "no conda environment at" in problem:
                where = problem.split("no conda environment at", 1)[1].split(" (")[0].strip()
                findings.append(
                    Finding(
                        "env-missing",
                        "error",
                        "environment",
                        "the locked conda environment",
                        f"none at {where}",
                        "envtool install --lockfile conda-lock.yml --prefix "
                        "PREFIX on the node (or pass --prefix)",
                        (r.host,),
                    )
                )
                continue
            findings.append(
                Finding(
                    "probe-failed",
                    "error",
                    part,
                    "a valid result",
                    problem,
                    "run the probe on the node by hand (envtool probe)",
                    (r.host,),
                )
            )
    envs = {r.host: r.env for r in reports if r.env is not None}
    if lock is not None:
        findings += drift.against_lock(lock, envs)
    findings += drift.against_majority(envs, lock)
    policy = gpuchecks.GpuPolicy(
        options.min_gpus,
        locked_cuda(lock),
        options.min_busbw,
        baseline_busbw(options.baseline) if options.baseline else None,
        options.tolerance,
    )
    findings += gpuchecks.check(reports, policy) + _cluster_result(reports, options)
    return drift.fold(findings)


def verify(
    options: VerifyOptions, on_done: Callable[[remote.HostResult], None] | None = None
) -> VerifyResult:
    """Fan the probes out, validate every answer, and compute the findings."""
    start = time.monotonic()
    if options.allreduce not in ALLREDUCE_MODES:
        raise InputError(f"--allreduce {options.allreduce!r}: use off, node or cluster")
    lock = None
    if options.lock_path is not None:
        lock = envread.from_lock(
            lockfile.read(options.lock_path), str(options.lock_path), options.platform
        )
    if options.baseline is not None:
        baseline_busbw(options.baseline)  # bad input is reported before anything starts
    fan = replace(options.fanout, node_args=_node_args(options))
    bundle = probes.bundle()
    if fan.bundle_dir:
        probes.write_bundle(Path(fan.bundle_dir))
        bundle = b""
    if fan.transport == "slurm":
        results = remote.run_slurm(options.hosts, fan, bundle)
    else:
        results = remote.run_all(options.hosts, fan, bundle, on_done)
    reports = [
        probes.host_report(r.host.target, r.ok, r.stdout, r.error, r.seconds) for r in results
    ]
    findings = decide(reports, lock, options)
    return VerifyResult(
        tuple(reports), tuple(findings), str(options.lock_path or ""), time.monotonic() - start
    )
