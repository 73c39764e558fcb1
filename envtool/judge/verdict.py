"""The verdict over every host's report: all findings of a verify run, folded (pure).

In: typed HostReports (protocol/), the lock's Environment, the policy (the baseline already
read). Out: Findings. One cause gives one finding: a runtime fact (torch, NCCL, cuDNN,
python) that differs on a host whose package for it already differs is not reported again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from envtool.judge import (
    baseline,
    consensus,
    consistency,
    critical,
    gpu,
    gpu_health,
    limits,
    network,
    packages,
    pairs,
    rendezvous,
    runtime,
)
from envtool.judge.cluster_policy import NOT_ACCEPTABLE, ClusterPolicy
from envtool.judge.findings import Check, Finding, Kind, Severity, explain, fold
from envtool.judge.rules import check_of, severity
from envtool.models import Environment, Package
from envtool.protocol.types import Failure, HostReport, Outcome, PairsRun, Problem, ProblemKind

ALLREDUCE_MODES = ("off", "node", "cluster", "pairs", "bisect")
PAIRWISE = ("pairs", "bisect")  # measured after the survey, pair by pair


@dataclass(frozen=True)
class Verdict:
    """Every host's report and the findings over them: what a verify run decided."""

    reports: tuple[HostReport, ...]
    findings: tuple[Finding, ...]
    lock_path: str
    seconds: float
    pairs: PairsRun | None = None  # --allreduce pairs
    unchecked: tuple[str, ...] = ()  # asked for, but this run cannot check it (and why)
    docker_run: tuple[str, ...] = ()  # --image: the options docker run started each host with
    lock_sha256: str = ""  # the lock's bytes (a prefix's install stamp names the lock it held)

    @property
    def machines(self) -> tuple[tuple[str, ...], ...]:
        """The hosts grouped by the machine they answered from (a name each, unless a
        machine was listed under several): what the counts count."""
        return consensus.machine_groups(self.reports)


@dataclass(frozen=True)
class Policy:
    """What verify was asked to hold the hosts to."""

    gpu: gpu.GpuPolicy
    allreduce: str = "off"  # off | node | cluster
    # --policy FILE (judge/cluster_policy.py)
    cluster: ClusterPolicy = field(default_factory=ClusterPolicy)
    # --transport docker: the container runtime that set /dev/shm and the ulimits
    container: limits.Runtime = field(default_factory=limits.Runtime)
    # the history store's figures per GPU model (judge/baseline.py); None: no history asked
    fleet: baseline.Fleet | None = None
    gpu_past: baseline.Past | None = None  # each card's widest link and memory in the history
    pair_fleet: baseline.Fleet | None = None  # the pairs' figures per model in the history


HOST = "<host>"  # a host's own name in its messages: findings then fold across hosts


def _without_name(text: str, host: str) -> str:
    """``text`` with the host's name (and ``user@name``) replaced by ``<host>``, as a whole
    word (host ``n1`` leaves ``n10`` alone)."""
    for name in dict.fromkeys((host, host.rpartition("@")[2])):
        text = re.sub(rf"(?<![\w.@-]){re.escape(name)}(?![\w-])", HOST, text)
    return text


def _reachability(r: HostReport) -> list[Finding]:
    """A host that gave no document, and each part of its document that failed."""
    hosts, out = (r.host,), []
    items: list[Failure | Problem] = [*([r.failure] if r.failure else []), *r.problems]
    for item in items:
        item = replace(
            item,
            detail=_without_name(item.detail, r.host),
            prefix=_without_name(item.prefix, r.host),
        )
        failure, problem = (item, None) if isinstance(item, Failure) else (None, item)
        if (failure and failure.outcome is Outcome.ENV_MISSING) or (
            problem and problem.kind is ProblemKind.ENV_MISSING
        ):
            # the node's words for what it looked for (a problem: the prefix it probed)
            looked = item.prefix if failure else item.detail
            kind, subject, actual = Kind.ENV_MISSING, "environment", looked
        elif failure:
            kind, subject, actual = Kind.UNREACHABLE, "host", ""
        else:
            assert problem is not None
            kind, subject, actual = Kind.PROBE_FAILED, problem.part, ""
        out.append(
            Finding(kind, severity(kind), subject, actual=actual, hosts=hosts,
                    failure=failure, problem=problem)
        )  # fmt: skip
    return out


def _not_checked(reports: list[HostReport], policy: Policy) -> list[Finding]:
    """A check asked for that a host's answer gives nothing to (and no failed part explains):
    no GPU facts under --min-gpus, no all-reduce result under --allreduce node."""
    kind, out = Kind.NOT_CHECKED, []
    for r in reports:
        failed = {p.part for p in r.problems}
        if not r.ok or "answer" in failed:
            continue
        if policy.gpu.min_gpus > 0 and r.facts is None and "facts" not in failed:
            expected = f"GPU facts (--min-gpus {policy.gpu.min_gpus})"
            out.append(Finding(kind, severity(kind), "GPUs", expected, "none", (r.host,)))
        if policy.allreduce == "node" and r.allreduce is None and "allreduce" not in failed:
            expected = "a result (--allreduce node)"
            out.append(Finding(kind, severity(kind), "all-reduce", expected, "none", (r.host,)))
    return out


def unused(policy: Policy) -> tuple[str, ...]:
    """What was asked for that this run cannot check (said beside "all good")."""
    busbw = policy.gpu.min_busbw is not None or policy.gpu.baseline_busbw is not None
    if busbw and policy.allreduce == "off":
        return ("busbw (--min-busbw/--baseline need an --allreduce mode)",)
    return ()


def _unreadable(envs: dict[str, Environment]) -> list[Finding]:
    """Each conda record a node could not read, by its file (judge/rules.py: it explains the
    package's absence on that node)."""
    kind = Kind.RECORD_UNREADABLE
    return [
        Finding(kind, severity(kind), name, "a record conda reads", f"{path}: {why}", (host,))
        for host, env in envs.items()
        for path, name, why in env.unreadable
    ]


def _no_cluster_result(reports: list[HostReport], mode: str) -> list[Finding]:
    """A cross-node run has one result (rank 0's node); none at all is a failure."""
    if mode != "cluster":
        return []
    ran = [r.allreduce for r in reports if r.allreduce is not None]
    if any(not ar.member for ar in ran):
        return []
    hosts = tuple(r.host for r in reports)
    return [
        Finding(Kind.ALLREDUCE_FAILED, severity(Kind.ALLREDUCE_FAILED), "all-reduce", hosts=hosts,
                cause=gpu.CAUSE_NO_RANK0)
    ]  # fmt: skip


def _package_key(f: Finding) -> str | None:
    if check_of(f.kind) is Check.LOCK:
        pkg = f.found or f.reference
        return pkg.key if pkg is not None else None
    if f.kind in (Kind.DIFFERS_FROM_MAJORITY, Kind.DIFFERS_BETWEEN_NODES):
        return f.subject
    return None


def _matches(key: str, names: tuple[str, ...]) -> bool:
    return any(key == n or key.startswith(n + "-cu") for n in names)


def _explained(found: list[Finding], kinds: tuple[Kind, ...] = ()) -> dict[str, set[str]]:
    """Runtime subject → the hosts where a package finding (or one of ``kinds``) explains it."""
    explained: dict[str, set[str]] = {}
    for f in found:
        if f.kind in kinds:
            for subject in runtime.EXPLAINS.get(f.subject, (f.subject,)):
                explained.setdefault(subject, set()).update(f.hosts)
        key = _package_key(f)
        if key is None:
            continue
        for subject, _, names in gpu.FACTS:
            if names and _matches(key, names):
                explained.setdefault(subject, set()).update(f.hosts)
    return explained


def _one_cause(found: list[Finding]) -> list[Finding]:
    """Drop what a package finding (or a file loaded from outside the prefix) on that host
    already explains: the runtime differing from the lock, a fact differing across nodes."""
    by_package = _explained(found)
    found = [
        f for f in found
        if not (f.kind is Kind.RUNTIME_DIFFERS and set(f.hosts) <= by_package.get(f.subject, set()))
    ]  # fmt: skip
    explained = _explained(found, (Kind.RUNTIME_DIFFERS, Kind.LOADED_OUTSIDE))
    out = []
    for f in found:
        if f.kind is Kind.VERSION_MISMATCH and f.subject in explained:
            kept = consensus.without_hosts(f, explained[f.subject])
            if kept is not None:
                out.append(kept)
        else:
            out.append(f)
    return out


def package_spread(
    envs: dict[str, Environment],
    lock: Environment | None,
    machines: consensus.Machines | None = None,
) -> list[Finding]:
    """Where the lock is silent: packages that differ between the nodes (a machine under two
    names counts once); an error when the package decides a DDP run (judge/critical.py:
    python, torch, NCCL, CUDA...), else a warning (``--no-lock`` must not let two pytorch
    builds pass as "all good")."""
    if len(envs) < 2:
        return []
    locked = set(packages.by_key(lock.packages)) if lock is not None else set()
    labels: dict[str, dict[str, str]] = {}
    read: dict[tuple[Package, ...], dict[str, str]] = {}  # the same records read once
    for host, env in envs.items():
        mine = read.get(env.packages)
        if mine is None:
            mine = read[env.packages] = {key: packages.effective(group).label() for key, group
                                         in packages.by_key(env.packages).items()
                                         if key not in locked}  # fmt: skip
        for key, label in mine.items():
            labels.setdefault(key, {})[host] = label
    out = []
    for key, per_host in sorted(labels.items()):
        values = {h: per_host.get(h, "absent") for h in envs}
        level = severity(Kind.DIFFERS_FROM_MAJORITY, ordinary=not critical.package(key))
        out += consensus.differences(
            values, Kind.DIFFERS_FROM_MAJORITY, level, key, Kind.DIFFERS_BETWEEN_NODES, machines
        )
    return out


def _inconsistencies(envs: dict[str, Environment], found: list[Finding]) -> list[Finding]:
    """Each node's environment on its own (judge/consistency.py); two torches on a node
    whose pip torch already shadows the lock's conda pytorch is that finding, not a second."""
    shadowed = {
        h for f in found if f.kind is Kind.PIP_SHADOWING and f.subject == "torch" for h in f.hosts
    }
    out = []
    for host, env in envs.items():
        for f in consistency.check(env):
            if not (f.kind is Kind.TWO_TORCHES and host in shadowed):
                out.append(replace(f, hosts=(host,)))
    return out


def accepted(findings: list[Finding], cluster: ClusterPolicy) -> list[Finding]:
    """The policy's known differences (``accept:``) said as info, never failed on; a kind
    that is not acceptable (a failed all-reduce) stays what it is, whatever made the policy."""
    known = cluster.accept - NOT_ACCEPTABLE.keys()
    return [replace(f, severity=Severity.INFO) if f.kind in known else f for f in findings]


def decide(
    reports: list[HostReport],
    lock: Environment | None,
    policy: Policy,
    pairs_run: PairsRun | None = None,
) -> list[Finding]:
    """Every finding over the hosts' reports (and the pairs' all-reduces), folded by host,
    one cause one finding (pure)."""
    found: list[Finding] = []
    for r in reports:
        found += _reachability(r)
    found += _not_checked(reports, policy)
    envs = {r.host: r.env for r in reports if r.env is not None}
    found += _unreadable(envs)
    if lock is not None:
        found += packages.against_lock(lock, envs)
    machines = consensus.machines(reports)  # names of one machine count once in majorities
    found += consensus.same_machine(reports)
    found += package_spread(envs, lock, machines)
    found += _inconsistencies(envs, found)
    for r in reports:
        found += runtime.check(r, lock)
    found += gpu.check(reports, policy.gpu, machines)
    if policy.gpu_past is not None:
        found += baseline.gpu_drift(reports, policy.gpu_past, found)
    pinned = policy.cluster.baselines
    if policy.fleet is not None or pinned:
        found += baseline.check(reports, policy.fleet or {}, policy.gpu.tolerance, found, pinned)
    found += gpu_health.check(reports, policy.cluster.gpus, policy.gpu.min_gpus, machines)
    found += limits.check(reports, policy.cluster.limits, machines, policy.container)
    found += _no_cluster_result(reports, policy.allreduce)
    found = network.one_cause(found + network.check(reports, machines))
    found += rendezvous.check(reports)
    links = pairs.ceilings(reports)  # a figure beyond a node's own links is refused
    paired = pairs.decide(pairs_run, policy.gpu, links) if pairs_run is not None else []
    if pairs_run is not None and policy.pair_fleet is not None:
        paired += baseline.check_pairs(reports, pairs_run.pairs, policy.pair_fleet,
                                       policy.gpu.tolerance, [*found, *paired])  # fmt: skip
    found, paired = accepted(found, policy.cluster), accepted(paired, policy.cluster)
    folded = fold([*_one_cause(found), *paired])
    known = policy.cluster.accept  # said as info: they explain nothing away
    return explain(rendezvous.explain_cluster(folded, policy.allreduce, known), known)
