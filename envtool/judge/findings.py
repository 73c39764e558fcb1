"""Findings as data: what kind, how bad, about what, on which hosts; no text for people.

Kinds, severities and checks are enums (judge/kinds.py) with one table of rules
(judge/rules.py). The wording of a finding (its expected/actual columns and its fix line) is
made where reports are rendered (envtool/report/labels.py). ``explain`` drops what another
finding on the same hosts already explains (one cause, one finding); ``exit_code`` is the one
place findings become an exit code.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from envtool.errors import EXIT_OK, EXIT_PROBLEMS
from envtool.judge.kinds import Check, Kind, Severity
from envtool.judge.rules import RULES
from envtool.models import Package
from envtool.protocol.types import Failure, Problem

__all__ = ["Check", "Finding", "Kind", "Severity", "exit_code", "explain", "failed", "fold"]

Spread = tuple[tuple[str, tuple[str, ...]], ...]  # each value and the hosts that have it


@dataclass(frozen=True)
class Finding:
    """One difference or problem.

    ``reference``/``found`` are the packages compared (the lock's or A's, the node's or B's);
    ``failure``/``problem`` what a host or a part of its answer came back as; other findings
    carry the values compared in ``expected``/``actual``. ``spread`` lists the values across
    nodes where no majority exists; ``cause`` tells apart findings of one kind whose fix
    differs; ``where`` is the environment a diff found it in (verify: the hosts say), or for
    a limit a container runtime set, the docker run option that set it (judge/limits.py).
    """

    kind: Kind
    severity: Severity
    subject: str  # the package or fact concerned
    expected: str = ""
    actual: str = ""
    hosts: tuple[str, ...] = ()
    reference: Package | None = None
    found: Package | None = None
    spread: Spread = ()
    cause: str = ""
    where: str = ""
    failure: Failure | None = None
    problem: Problem | None = None
    packages: tuple[Package, ...] = ()  # an inconsistency: the packages involved
    follows: int = 0  # how many findings on its hosts follow from this one (not listed)


def worst(findings: Iterable[Finding]) -> Severity | None:
    """The highest severity among findings, None when there are none."""
    return min((f.severity for f in findings), key=lambda s: s.rank, default=None)


def failed(findings: Iterable[Finding], at: Severity = Severity.ERROR) -> bool:
    """Whether any finding is at least as bad as ``at``."""
    level = worst(findings)
    return level is not None and level.rank <= at.rank


def exit_code(findings: Iterable[Finding], fail_at: Severity = Severity.ERROR) -> int:
    """0 when no finding is as bad as ``fail_at``, else 1 (problems found)."""
    return EXIT_PROBLEMS if failed(findings, fail_at) else EXIT_OK


def fold(findings: Iterable[Finding]) -> list[Finding]:
    """Merge findings that differ only by host into one (like clush -b)."""
    merged: dict[Finding, list[str]] = {}
    for f in findings:
        merged.setdefault(replace(f, hosts=()), []).extend(f.hosts)
    return [replace(f, hosts=tuple(sorted(set(hosts)))) for f, hosts in merged.items()]


def _explainer(
    f: Finding, causes: list[Finding], accepted: frozenset[Kind]
) -> tuple[set[str], list[Finding]]:
    """The hosts of ``f`` no cause explains, and the causes that explain the others."""
    left, by = set(f.hosts), []
    for cause in causes:
        rule = RULES[cause.kind]
        if cause.kind is f.kind or f.kind not in rule.explains:
            continue
        if cause.kind in accepted and f.kind is Kind.ALLREDUCE_FAILED:
            continue  # a known difference never hides a measured failure
        if rule.by_subject and cause.subject != f.subject:
            continue
        hit = left if rule.whole_run else left & set(cause.hosts)
        if hit:
            left -= hit
            by.append(cause)
    return left, by


def explain(findings: Iterable[Finding], accepted: frozenset[Kind] = frozenset()) -> list[Finding]:
    """Each finding a cause on the same hosts explains (rules.RULES' ``explains``: a missing
    environment explains everything else on its node, no CUDA its GPU count) is dropped, or
    loses those hosts; each cause counts what follows from it. Causes themselves stay. A kind
    the policy accepts (``accepted``, said as info) still explains what follows from it (an
    accepted model difference, its memory difference), but never a failed all-reduce: a known
    difference must not hide a run that failed."""
    found = list(findings)
    causes = [f for f in found if RULES[f.kind].explains and f.hosts]
    follows: dict[int, int] = {}
    out: list[Finding] = []
    for f in found:
        left, by = _explainer(f, causes, accepted)
        for cause in by:
            follows[id(cause)] = follows.get(id(cause), 0) + 1
        if left == set(f.hosts):
            out.append(f)
        elif left:
            spread = tuple((v, tuple(h for h in hs if h in left)) for v, hs in f.spread)
            kept = tuple(h for h in f.hosts if h in left)
            out.append(replace(f, hosts=kept, spread=tuple((v, hs) for v, hs in spread if hs)))
    return [replace(f, follows=f.follows + follows.get(id(f), 0)) for f in out]


def gpu_indices(subjects: list[str]) -> str:
    """``GPU 0-3,6``: the GPUs of ``GPU N`` subjects, runs of consecutive indices folded."""
    numbers = sorted({int(s.removeprefix("GPU ")) for s in subjects})
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return "GPU " + ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def fold_gpus(found: list[Finding]) -> list[Finding]:
    """One finding for the GPUs of a node that share it word for word (kind, expected, found,
    cause): eight slowed cards are ``GPU 0-7``, one finding, not eight (one cause, one
    finding); any other finding stays as it is, in its place."""
    groups: dict[tuple[object, ...], list[Finding]] = {}
    order: list[tuple[object, ...] | Finding] = []
    for f in found:
        if not f.subject.removeprefix("GPU ").isdigit() or not f.subject.startswith("GPU "):
            order.append(f)
            continue
        key = (f.kind, f.severity, f.expected, f.actual, f.hosts, f.cause, f.where)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(f)
    out = []
    for item in order:
        if isinstance(item, Finding):
            out.append(item)
            continue
        same = groups[item]
        out.append(replace(same[0], subject=gpu_indices([f.subject for f in same])))
    return out
