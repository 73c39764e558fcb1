"""What decides a DDP run: the packages and findings a report leads with.

The interpreter, torch, NCCL, CUDA in any packaging, cuDNN and MPI decide whether ranks can
run together; a differing ``anyio`` does not. Package findings about other packages are
warnings and fold into counts in the reports (``--all`` lists them); every finding that is
not about a package (runtime, consistency, GPU, all-reduce, reachability) is critical. An
error about another package (its record unreadable, the package missing) fails a run all
the same: a report lists it after the critical ones, never in a count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from envtool.judge.cuda import SPLIT
from envtool.judge.findings import Check, Finding, Kind, Severity
from envtool.judge.rules import check_of

NAMES = frozenset(
    {
        "python", "torch", "pytorch", "libtorch", "pytorch-gpu", "pytorch-cpu", "pytorch-cuda",
        "pytorch-mutex", "nccl", "cudnn", "cudatoolkit", "cuda", "cuda-version", "cutensor",
        "openmpi", "mpich", "mpi", "mpi4py", "ucx", "libfabric", "aws-ofi-nccl", "magma",
        "triton", "torchvision", "torchaudio",
    }
)  # fmt: skip
_WHEEL = re.compile(r"^nvidia-[a-z0-9-]+$")  # nvidia-nccl-cu12, nvidia-cuda-runtime, ...


def package(name: str) -> bool:
    """``name`` (conda or PyPI) is one that decides a DDP run."""
    name = name.lower()
    return name in NAMES or name in SPLIT or name.startswith("cuda-") or bool(_WHEEL.match(name))


def finding(f: Finding) -> bool:
    """``f`` is about what decides a DDP run (a report shows it first, always): every
    finding but those about ordinary packages (their versions, builds, presence)."""
    if check_of(f.kind) not in (Check.LOCK, Check.MAJORITY) or f.kind in _ALWAYS:
        return True
    names = [p.name for p in (f.reference, f.found) if p is not None] or [f.subject]
    return any(package(n) for n in names)


_ALWAYS = frozenset(
    {
        Kind.ARTIFACT_DIFFERS,
        Kind.VERSION_MISMATCH,
        Kind.GPU_COUNT_DIFFERS,
        Kind.GPU_MODEL_DIFFERS,  # the cards across nodes: never "other packages"
        Kind.GPU_MEMORY_DIFFERS,
        Kind.GPU_CAPABILITY_DIFFERS,
        Kind.NCCL_ENV_DIFFERS,
        Kind.LOADER_ENV_DIFFERS,
    }
)


def ordered(findings: Iterable[Finding]) -> list[Finding]:
    """What decides a DDP run first, then by severity, kind and subject."""
    return sorted(
        findings, key=lambda f: (not finding(f), f.severity.rank, f.kind.value, f.subject)
    )


def split(
    findings: Iterable[Finding], show_all: bool, fold_errors: bool = False
) -> tuple[list[Finding], dict[str, int]]:
    """The findings a report lists (all critical ones and every error, and the rest with
    ``show_all``) and how many of each kind it folds into a count; ``fold_errors``: an
    ordinary package's errors are counted too (``envtool diff``: a side's missing packages are
    differences, not failures, 519 of them between two real locks)."""
    shown: list[Finding] = []
    folded: dict[str, int] = {}
    for f in ordered(findings):
        failing = f.severity is Severity.ERROR and not fold_errors
        if show_all or failing or finding(f):
            shown.append(f)
        else:
            label = f"{f.kind.value} ({f.severity.value})"
            folded[label] = folded.get(label, 0) + 1
    return shown, folded
