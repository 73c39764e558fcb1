"""``envtool verify``: every host probed in parallel, judged against the lock and each other.

The flow in one place: read the lock and the baseline (bad input stops here, before any
process starts) → ask every host (cluster/survey.py) → judge (judge/verdict.py, pure) →
report (report/verify.py) → the exit code (judge/findings.py).
"""

from __future__ import annotations

import os
import shlex
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from envtool import environments, yamlio
from envtool import policy as policy_file
from envtool.cluster import docker_run, hosts, pairs, rdzv, survey
from envtool.cluster.options import FanoutOptions
from envtool.cluster.transports import check_ssh_options, host_has_nvidia_gpus
from envtool.errors import InputError
from envtool.history import queries, store
from envtool.history.record import Recording, remember
from envtool.judge import baseline as fleet_baseline
from envtool.judge import gpu, unchecked, verdict
from envtool.judge import pairs as judge_pairs
from envtool.judge.cluster_policy import ClusterPolicy
from envtool.judge.findings import exit_code
from envtool.judge.limits import CONTAINER, Runtime
from envtool.lock import lockfile, stamp
from envtool.lock.prefixes import env_name
from envtool.models import Environment
from envtool.protocol.types import Answer, HostReport
from envtool.report import console, history_text
from envtool.report import verify as report


@dataclass(frozen=True)
class VerifyArgs:
    """What ``envtool verify`` (or ``preflight``) was asked to do."""

    hosts_spec: str | None
    lock_path: Path | None  # None: --no-lock
    fanout: FanoutOptions
    platform: str = "linux-64"
    allreduce: str = "off"
    allreduce_args: str = "-b 8 -e 32M -f 4 -n 10 -w 2"
    rdzv_endpoint: str = ""
    min_gpus: int = 1
    min_busbw: float | None = None
    baseline: Path | None = None
    tolerance: float = 0.10
    fmt: str = "table"
    output: Path | None = None
    junit: Path | None = None
    show_all: bool = False  # the table lists every finding, not only the DDP-critical ones
    wide: bool = False  # the findings as one grid, not a block each
    policy_path: Path | None = None  # --policy FILE (envtool/policy.py)
    recording: Recording = field(default_factory=Recording)  # --history, --metrics-file
    command: str = "verify"  # the command recorded in the history


Baseline = tuple[float, tuple[tuple[str, float], ...]]  # the median node's, and each node's


def baseline_busbw(path: Path) -> Baseline:
    """The peak busbw of an earlier envtool JSON report (each node's own, and the median of
    them: no node's claim sets another's floor), or of an nccl-tests log."""
    from envtool.nccl.model import peak_busbw
    from envtool.nccl.parse import parse_all_reduce
    from envtool.protocol import verify_report

    text = yamlio.read_text(path, "baseline")
    if text.lstrip().startswith("{"):
        doc = verify_report.loads(text, str(path))
        peaks = tuple((h.host, h.allreduce.peak_busbw) for h in doc.hosts
                      if h.allreduce is not None and h.allreduce.peak_busbw is not None
                      and not h.allreduce.member)  # fmt: skip
        if not peaks:
            raise InputError(f"{path}: the report holds no all-reduce result")
        return statistics.median_low([v for _, v in peaks]), peaks
    peak = peak_busbw(parse_all_reduce(text, str(path)).rows, min_bytes=0)  # its all_reduce run
    if peak is None:
        raise InputError(f"{path}: no rows to take a baseline from")
    return peak, ()


def _lock(args: VerifyArgs) -> Environment | None:
    if args.lock_path is None:
        return None
    data = lockfile.read(args.lock_path)
    return environments.from_lock(data, str(args.lock_path), args.platform)


# set by envtool for each node (survey.node_args, transports.with_role): not the user's
RESERVED = ("--nnodes", "--rdzv-endpoint", "--rdzv-id", "--rdzv-role", "--rdzv-host-node",
            "--timeout", "--worker", "--out", "--deadline", "--started", "--facts")  # fmt: skip


def allreduce_args(text: str) -> list[str]:
    """``--allreduce-args`` split and checked here, before any node is contacted, by the very
    parser the nodes run (envtool_node.allreduce): bad flags are the user's, exit 2."""
    from envtool_node import allreduce

    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise InputError(f"--allreduce-args {text!r}: {exc}") from None
    for arg in argv:
        if arg.split("=", 1)[0] in RESERVED:
            raise InputError(f"--allreduce-args: {arg.split('=', 1)[0]} is set by envtool")
    try:
        allreduce.parse(argv)
    except ValueError as exc:
        raise InputError(
            f"--allreduce-args {text!r}: {str(exc).removeprefix('allreduce arguments: ')}"
        ) from None
    return argv


def _rdzv_port(endpoint: str) -> int:
    """The port each pair's rendezvous uses (on the pair's first node): --rdzv-endpoint's."""
    port = endpoint.rpartition(":")[2] if endpoint else ""
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise InputError(f"--rdzv-endpoint {endpoint!r}: expected HOST:PORT, PORT 1-65535")
    return int(port) if port else survey.DEFAULT_RDZV_PORT


@dataclass(frozen=True)
class Plan:
    """One verify run, built once from its arguments before any node is contacted (bad input
    stops here): the hosts, the lock read once, the policy, the fan-out options every host
    gets (node arguments, the lock's env name, the host of the rendezvous store) and, for
    ``pairs``/``bisect``, how each pair is launched."""

    hosts: tuple[hosts.Host, ...]
    lock: Environment | None
    policy: verdict.Policy
    fan: FanoutOptions
    how: pairs.How | None  # --allreduce pairs/bisect
    unchecked: tuple[str, ...] = ()  # what this run cannot check, and why (Verdict.unchecked)
    docker_user: tuple[str, ...] = ()  # --image: the user's own --docker-run-arg


def container_runtime(fan: FanoutOptions) -> tuple[FanoutOptions, Runtime]:
    """--transport docker: docker run's options completed (--image: the defaults a job starts
    its container with, the user's in their place) and who set the limits the hosts are
    judged on; other transports: as they are, the node's own."""
    if fan.transport != "docker":
        return fan, Runtime()
    if not fan.docker_run:
        return fan, Runtime(CONTAINER)
    chosen = docker_run.options(fan.docker_run_args, host_has_nvidia_gpus())
    return replace(fan, docker_run_args=chosen), docker_run.runtime(chosen)


def plan(args: VerifyArgs) -> Plan:
    """The run's plan; InputError for anything wrong in what was asked."""
    user = args.fanout.docker_run_args
    fanout, container = container_runtime(args.fanout)
    args = replace(args, fanout=fanout)
    if args.allreduce not in verdict.ALLREDUCE_MODES:
        raise InputError(
            f"--allreduce {args.allreduce!r}: use {', '.join(verdict.ALLREDUCE_MODES)}"
        )
    host_list = tuple(hosts.resolve(args.hosts_spec))
    mine = allreduce_args(args.allreduce_args) if args.allreduce != "off" else []
    port = _rdzv_port(args.rdzv_endpoint)
    check_ssh_options(args.fanout)
    lock = _lock(args)
    baseline, per_node = baseline_busbw(args.baseline) if args.baseline else (None, ())
    cluster = policy_file.read(args.policy_path) if args.policy_path else ClusterPolicy()
    past, unread = history_of(args)
    policy = verdict.Policy(
        gpu.GpuPolicy(args.min_gpus, gpu.locked_cuda(lock), args.min_busbw, baseline,
                      args.tolerance, per_node),
        args.allreduce, cluster, container, *past,
    )  # fmt: skip
    at = rdzv.endpoint(host_list, args.rdzv_endpoint, os.environ)  # checked from every node
    check = rdzv.args(host_list, at, args.fanout)
    left = args.fanout.timeout - (rdzv.window(args.fanout) if check else 0.0)  # after it
    node_args = (*check, *survey.node_args(host_list, args.allreduce, mine, left, at))
    # with a lock, the environment is searched by its name and nothing else stands in for it
    name = env_name(args.lock_path) or ("ddp" if args.lock_path is not None else "")
    # the store's host is told so, the others are not: the host the endpoint names (across
    # nodes the first host where it names none, as before)
    named = rdzv.store(host_list, at)
    store = named.label if named is not None and check else ""
    store = store or (host_list[0].label if args.allreduce == "cluster" else "")
    fan = replace(args.fanout, node_args=node_args, env_name=name, rdzv_host=store)
    how = None
    if args.allreduce in verdict.PAIRWISE:  # each pair is told its own (cluster/pairs.py)
        bare = replace(args.fanout, env_name=name)
        how = pairs.How(bare, tuple(mine), port, args.rdzv_endpoint.rpartition(":")[0],
                        console.step)  # fmt: skip
    rendezvous = rdzv.unchecked(host_list, at, args.fanout)
    unchecked = (*verdict.unused(policy), *([rendezvous] if rendezvous else []),
                 *([unread] if unread else []))  # fmt: skip
    return Plan(host_list, lock, policy, fan, how, unchecked, user)


def _without_refused(
    p: Plan, reports: list[HostReport], done: Callable[[Answer], None]
) -> tuple[Plan, list[HostReport]]:
    """--image on an engine that cannot grant a default ``--ulimit`` (runc refused it, as
    rootless Docker or a dockerd with a lower LimitMEMLOCK does): the hosts asked again
    without it, and said beside the verdict, so the gate judges the image, not the engine. A
    limit the user asked for stays refused (its fix is said)."""
    for _ in range(len(docker_run.ULIMITS)):
        if not p.fan.docker_run:
            break
        details = [r.failure.detail for r in reports if r.failure is not None]
        option = docker_run.without_refused(p.fan.docker_run_args, p.docker_user, details)
        if not option:
            break
        chosen = tuple(o for o in p.fan.docker_run_args if o != option)
        said = (f"docker run {option} (the Docker engine refused it, its own hard limit being "
                "lower: the containers ran with the engine's default)")  # fmt: skip
        p = replace(p, fan=replace(p.fan, docker_run_args=chosen), unchecked=(*p.unchecked, said),
                    policy=replace(p.policy, container=docker_run.runtime(chosen)))  # fmt: skip
        reports = survey.survey(p.hosts, p.fan, done)
    return p, reports


def run(args: VerifyArgs) -> int:
    """1 when any finding is an error (drift, an unreachable host, a failed all-reduce)."""
    result = decide(args)
    report.show(result, args.fmt, args.output, args.show_all, args.wide)
    if args.junit is not None:
        report.show(result, "junit", args.junit)
    said = remember(args.recording, report.document(result), args.command, measured(args))
    if said:
        history_text.not_recorded(said)
    return exit_code(result.findings)


def measured(args: VerifyArgs) -> str:
    """How the run measured its all-reduce (a baseline compares only runs measured alike)."""
    return f"{args.allreduce} {args.allreduce_args}" if args.allreduce != "off" else ""


History = tuple[fleet_baseline.Fleet | None, fleet_baseline.Past | None,
                fleet_baseline.Fleet | None]  # fmt: skip


def history_of(args: VerifyArgs) -> tuple[History, str]:
    """With a history store, read before any node is asked: each GPU model's all-reduce
    figures in its last good runs measured alike (with an all-reduce; none yet: an empty
    fleet, said), each card's widest link and memory total, and the pairs' figures (with
    ``--allreduce pairs|bisect``). A store that cannot be read (corrupt, foreign, newer) is
    no baseline: what the run could not check, said; the run goes on (its recording then
    says the same)."""
    path = args.recording.history
    if path is None:
        return (None, None, None), ""
    paired = args.allreduce in ("pairs", "bisect")
    if not path.exists():
        return (({} if args.allreduce != "off" else None), {}, ({} if paired else None)), ""
    try:
        with store.opened(path, create=False) as db:
            found = queries.baselines(db, measured(args)) if args.allreduce != "off" else None
            past = queries.gpu_past(db)
            pair_found = queries.pair_baselines(db, measured(args)) if paired else None
    except InputError as exc:
        return (None, None, None), f"the fleet's history (its baselines, each card's past): {exc}"
    return (found, past, pair_found), ""


def decide(args: VerifyArgs) -> verdict.Verdict:
    """The whole verify run, nothing printed (``envtool explain --hosts`` runs it too)."""
    start = time.monotonic()
    p = plan(args)
    with console.Progress(len(p.hosts), quiet=args.fmt != "table") as progress:
        reports = survey.survey(p.hosts, p.fan, progress.done)
        p, reports = _without_refused(p, reports, progress.done)
    run = None
    if p.how is not None:  # the nodes that answered, pair by pair
        answered = [h for h, r in zip(p.hosts, reports, strict=True) if r.ok]
        links = judge_pairs.ceilings(reports)  # what each node's own links can carry
        run = pairs.run(args.allreduce, answered, p.how, p.policy.gpu, links)
    findings = verdict.decide(reports, p.lock, p.policy, run)
    pinned, fleet_now = p.policy.cluster.baselines, p.policy.fleet
    short = fleet_baseline.unjudged(reports, fleet_now, pinned) if fleet_now is not None else []
    if run is not None and p.policy.pair_fleet is not None:
        short += fleet_baseline.unjudged_pairs(reports, run.pairs, p.policy.pair_fleet)
    result = verdict.Verdict(
        tuple(reports), tuple(findings), str(args.lock_path or ""), time.monotonic() - start,
        run, (*p.unchecked, *unchecked.missing_parts(reports), *unchecked.unread(reports),
              *short),
        p.fan.docker_run_args if p.fan.docker_run else (),
        stamp.lock_hash(args.lock_path) if args.lock_path is not None else "",
    )  # fmt: skip
    return result
