"""The words of a report: each finding's expected/actual columns and its fix line, and what a
failed host or part of an answer is called. The one place such text is made."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from envtool.cluster import docker_run
from envtool.judge import gpu, pairs, runtime
from envtool.judge.consensus import NO_MAJORITY
from envtool.judge.findings import Check, Finding, Kind
from envtool.judge.rules import RULES, check_of
from envtool.models import Package
from envtool.protocol.types import Failure, Outcome, Problem, ProblemKind
from envtool.report.gpu_labels import gpu_words
from envtool.report.limit_labels import limit_short, limit_words
from envtool.report.net_labels import net_words

_FAILURE = {
    Outcome.SSH_FAILED: "ssh failed",
    Outcome.TIMED_OUT_ON_NODE: "timed out on the node",
    Outcome.KILLED: "killed on the node",
    Outcome.NO_TEMP_DIR: "cannot create a temp dir",
    Outcome.NO_BUNDLE: "cannot unpack the probe bundle",
    Outcome.BUNDLE_UNTRUSTED: "the --bundle-dir was refused",
    Outcome.NO_PYTHON: "no python",
    Outcome.ENV_MISSING: "no environment",
}


def failure_text(failure: Failure) -> str:
    """``timed out on the node: <the node's last line>``; the transport's words as they are."""
    if failure.outcome in (
        Outcome.TIMED_OUT,
        Outcome.CANNOT_START,
        Outcome.NO_ANSWER,
        Outcome.OVERSIZED,
    ):
        return failure.detail
    if failure.outcome is Outcome.ENV_MISSING and failure.prefix:
        return failure.prefix  # what the node looked for, in its own words
    label = _FAILURE.get(failure.outcome, f"exited {failure.returncode}")
    return f"{label}: {failure.detail}"


def problem_text(problem: Problem) -> str:
    """``export: <why>`` for a part of a node's answer that failed or was garbage."""
    if problem.kind is ProblemKind.MALFORMED:
        return f"{problem.part}: malformed ({problem.detail})"
    return f"{problem.part}: {problem.detail}"


@dataclass(frozen=True)
class Words:
    """A finding as people read it."""

    expected: str
    actual: str
    fix: str


def _in(f: Finding) -> str:
    return f" in {f.where}" if f.where else ""


def _pkg(p: Package | None) -> Package:
    assert p is not None, "a package finding without its package"
    return p


def _package_words(f: Finding) -> Words:
    ref, got = f.reference, f.found
    if f.kind is Kind.MISSING:
        a = _pkg(ref)
        return Words(a.label(), "absent", f"install {a.label()}{_in(f)}")
    if f.kind is Kind.EXTRA:
        b = _pkg(got)
        return Words("absent", b.label(), f"remove {b.name}{_in(f)} if it is not needed")
    a, b = _pkg(ref), _pkg(got)
    if f.kind is Kind.MANAGER_DIFFERS:
        expected, actual = f"{a.manager} {a.label()}", f"{b.manager} {b.label()}"
        return Words(expected, actual, f"install {f.subject} with {a.manager}{_in(f)}")
    if f.kind is Kind.CHANNEL_DIFFERS:
        expected, actual = f"{a.label()} from {a.channel}", f"{b.label()} from {b.channel}"
        return Words(expected, actual, f"install {f.subject} from {a.channel}")
    if f.kind is Kind.PIP_SHADOWING:
        actual = f"pip {b.label()} shadows conda {a.label()}{_in(f)}"
        return Words(f"{a.label()} from conda only", actual, f"pip uninstall {b.name}")
    return Words(a.label(), b.label(), f"install {a.label()}{_in(f)}")  # version/build


_LOADED_FIX = {
    runtime.INTERPRETER: "{prefix}/bin/python runs another environment's python: reinstall "
    "the environment (envtool install --lockfile conda-lock.yml --prefix {prefix})",
    runtime.PYTHONPATH: "unset PYTHONPATH (or drop that folder from it)",
    runtime.USER_SITE: "export PYTHONNOUSERSITE=1, or pip uninstall --user {subject}",
    runtime.SYS_PATH: "find what puts that folder on sys.path (a .pth file in site-packages, "
    "sitecustomize, PYTHONHOME) and remove it",
    runtime.LD_PRELOAD: "unset LD_PRELOAD (it loads that library before the environment's)",
    runtime.LD_LIBRARY_PATH: "remove that folder from LD_LIBRARY_PATH (module unload ...)",
    runtime.LOADER: "the loader found it outside the environment (RPATH, ld.so.conf, the "
    "system folders): install the locked {subject} into {prefix} and relink",
}
_CAUSE = {
    runtime.INTERPRETER: "another interpreter",
    runtime.PYTHONPATH: "through PYTHONPATH",
    runtime.USER_SITE: "from the user site",
    runtime.SYS_PATH: "through sys.path",
    runtime.LD_PRELOAD: "through LD_PRELOAD",
    runtime.LD_LIBRARY_PATH: "through LD_LIBRARY_PATH",
    runtime.LOADER: "by the loader",
}


def _digest(p: Package) -> str:
    return f"sha256 {p.sha256[:12]}…" if p.sha256 else f"md5 {p.md5[:12]}…"


def _artifact_words(f: Finding) -> Words:
    a, b = _pkg(f.reference), _pkg(f.found)
    actual = f"{b.label()} with {_digest(b)}{_in(f)}"
    fix = f"reinstall {a.label()} from the lock's URL{_in(f)} (another file carries its name)"
    return Words(f"{a.label()} with {_digest(a)}", actual, fix)


def _cuda_label(p: Package) -> str:
    from envtool.judge.cuda import source

    found = source(p)
    return f"{p.label()} (CUDA {found.cuda})" if found is not None else p.label()


def _consistency_words(f: Finding) -> Words:
    """Rule, packages involved, fix: each inconsistency inside one environment."""
    listed = ", ".join(_cuda_label(p) for p in f.packages)
    rule, fix = {
        Kind.TWO_TORCHES: ("one torch (conda's or pip's)",
                           f"pip uninstall torch{_in(f)}, or drop pytorch from conda"),
        Kind.CUDA_MIXED: (f"one CUDA major (found {f.expected})",
                          "keep one CUDA major: re-lock with one cudatoolkit/cuda-version and "
                          "the torch build for it; remove the other major's packages/wheels"),
        Kind.CUDA_VERSION_MISMATCH: (f"CUDA runtime packages of cuda-version {f.expected}",
                                     f"install the CUDA packages of cuda-version {f.expected} "
                                     "(or re-lock): conda would not solve this mix"),
        Kind.TWO_NCCLS: ("one NCCL library",
                         "keep one NCCL: the conda nccl or the nvidia-nccl wheel torch needs"),
        Kind.CUDA_STACKS_MIXED: ("one CUDA stack (conda-forge's, or the pytorch channel's)",
                                 "install pytorch and CUDA from one channel (conda-forge's "
                                 "cuda-version, or pytorch-cuda with -c pytorch -c nvidia)"),
        Kind.OTHER_PYTHON: (f"builds for python {f.expected}",
                            f"re-install those packages for python {f.expected} (re-lock)"),
    }.get(f.kind, ("", ""))  # fmt: skip
    return Words(rule, listed, fix)


def _runtime_words(f: Finding) -> Words:
    if f.kind is Kind.LOADED_OUTSIDE:
        fix = _LOADED_FIX.get(f.cause, "").format(prefix=f.expected, subject=f.subject)
        pinned = f"{f.reference.label()} " if f.reference is not None else ""
        actual = f"{f.actual} ({_CAUSE.get(f.cause, f.cause)})"
        return Words(f"{pinned}from {f.expected}", actual, fix)
    if f.kind is Kind.LOADED_TWICE and f.cause == runtime.PARTS:
        fix = ("one cuDNN install per environment: remove the other one (a pip nvidia-cudnn "
               "wheel beside conda's cudnn: pip uninstall it), or drop its folder from "
               "LD_LIBRARY_PATH")  # fmt: skip
        return Words("cuDNN's parts from its own install", f.actual, fix)
    if f.kind is Kind.LOADED_TWICE:
        fix = f"one {f.subject} per process: unset LD_PRELOAD, or drop the other copy's folder"
        return Words("one copy mapped", f.actual, fix + " from LD_LIBRARY_PATH")
    locked = f" (locked {f.reference.label()})" if f.reference is not None else ""
    fix = (
        "install the locked environment (envtool install) and run its own bin/python"
        if f.subject == "python"
        else "install the locked packages into the environment (envtool install --lockfile "
        "conda-lock.yml --prefix PREFIX) and remove other copies"
    )
    actual = f"{f.actual} loaded" if f.actual else "not loaded"
    return Words(f"{f.subject} {f.expected}{locked}", actual, fix)


def words(f: Finding, nodeset: Callable[[Sequence[str]], str] = ",".join) -> Words:
    """The expected/actual columns and the fix line of ``f``; ``nodeset`` folds host lists."""
    fix = RULES[f.kind].fix.format(subject=f.subject)
    if f.cause != NO_MAJORITY and (gpu_layer := gpu_words(f)) is not None:
        return Words(*gpu_layer)
    if (net := net_words(f)) is not None:
        return Words(*net)
    if (limit := limit_words(f)) is not None:
        return Words(*limit)
    if check_of(f.kind) is Check.RUNTIME:
        return _runtime_words(f)
    if check_of(f.kind) is Check.CONSISTENCY:
        return _consistency_words(f)
    if f.kind is Kind.ARTIFACT_DIFFERS:
        return _artifact_words(f)
    if f.reference is not None or f.found is not None:
        return _package_words(f)
    if f.cause == NO_MAJORITY:
        actual = "; ".join(f"{value} on {nodeset(hosts)}" for value, hosts in f.spread)
        return Words("the same on every node (no majority)", actual, fix)
    if f.kind is Kind.UNREACHABLE and f.failure is not None:
        if f.failure.outcome is Outcome.OVERSIZED:
            fix = "see what the node prints (envtool probe on it), or raise --max-output"
        fix = _rlimit_fix(f.failure.detail) or fix
        return Words("answers", failure_text(f.failure), fix)
    if f.kind is Kind.ENV_MISSING:
        return Words("the locked conda environment", f.actual, fix)
    if f.kind is Kind.PROBE_FAILED and f.problem is not None:
        return Words("a valid result", problem_text(f.problem), fix)
    if f.kind is Kind.PROBE_FAILED and f.cause == pairs.CAUSE_IMPLAUSIBLE:
        fix = "that node's rank 0 reported figures no link explains: check its node package "
        return Words(f.expected, f.actual, fix + "and its answers (they were not used)")
    if f.kind is Kind.ALLREDUCE_FAILED and f.cause == gpu.CAUSE_NO_RANK0:
        return Words("a result from rank 0", "no node reported one",
                     "check the rendezvous endpoint and ports")  # fmt: skip
    return Words(f.expected, f.actual, fix)


def _rlimit_fix(detail: str) -> str:
    """The fix where the Docker engine could not give a container a ``--ulimit`` ("" else)."""
    name = docker_run.refused_limit(detail)
    if not name:
        return ""
    unit = {"memlock": "LimitMEMLOCK=infinity", "nofile": "LimitNOFILE="}.get(name, "its limits")
    return (f"the Docker engine cannot raise the container's {name} limit (its own hard limit "
            f"is lower: {unit} in dockerd's systemd unit, or rootless Docker): raise it there, "
            f"or run with what it allows: --docker-run-arg=--ulimit={name}=N")  # fmt: skip


def short(f: Finding) -> str:
    """A finding in a few words, for a summary line: ``nccl 2.16.5.1 vs 2.18.3.1``."""
    a, b = f.reference, f.found
    if (brief := limit_short(f)) is not None:
        return brief
    if f.kind is Kind.ENV_MISSING:
        return "no environment"
    if f.kind is Kind.UNREACHABLE:
        return "unreachable"
    if f.kind is Kind.RECORD_UNREADABLE:
        return f"unreadable {f.subject} record"
    if f.kind is Kind.MISSING and a is not None:
        return f"no {a.name}"
    if f.kind is Kind.VERSION_DIFFERS and a is not None and b is not None:
        return f"{a.name} {b.version} vs {a.version}"
    if f.kind is Kind.BUILD_DIFFERS and a is not None and b is not None:
        return f"{a.name} build {b.build} vs {a.build}"
    if f.kind is Kind.TOO_FEW_GPUS:
        return f"{f.actual} GPUs, {f.expected}"
    if f.expected and f.actual and len(f.expected) + len(f.actual) <= 40:
        return f"{f.subject} {f.actual} vs {f.expected}"
    return f"{f.kind.value} {f.subject}"


def folded_text(folded: dict[str, int]) -> str:
    """``and 12 more about other packages: 10 version-differs (warning), ...``."""
    total = sum(folded.values())
    counts = ", ".join(f"{n} {label}" for label, n in sorted(folded.items()))
    return f"and {total} more about other packages: {counts} (--all lists them)"
