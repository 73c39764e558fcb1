"""Pure comparison of environments, package by package: findings, no I/O, no text."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from envtool.judge import critical
from envtool.judge.findings import Finding, Kind
from envtool.judge.rules import severity
from envtool.models import Environment, Package

Group = dict[str, Package]  # manager → the package of one key


def by_key(packages: Iterable[Package]) -> dict[str, Group]:
    """Packages grouped by what they are matched by (conda pytorch meets pip torch); a
    metapackage (pytorch-gpu, pytorch-cpu, pytorch-cuda, cuda) is a key of its own."""
    out: dict[str, Group] = {}
    for pkg in packages:
        out.setdefault(pkg.key, {})[pkg.manager] = pkg
    return out


def effective(group: Group) -> Package:
    """What ``import`` finds: pip's copy shadows conda's (for ``torch``: pip's torch, else
    conda's pytorch, never a metapackage)."""
    return group.get("pip") or group["conda"]


def _finding(
    kind: Kind, a: Package | None, b: Package | None, where: str, subject: str = ""
) -> Finding:
    named = a if a is not None else b
    assert named is not None
    # another numpy is not an error beside another nccl (rules.RULES: which kinds are lenient;
    # a missing package stays an error, the job's imports fail, and so does another artifact)
    level = severity(kind, ordinary=not critical.package(named.name))
    if kind is not Kind.ARTIFACT_DIFFERS:  # the others are about name/version/build
        a, b = (a.identity() if a else None), (b.identity() if b else None)
    return Finding(kind, level, subject or named.name, reference=a, found=b, where=where)


def same_artifact(a: Package, b: Package) -> bool | None:
    """Whether two records of one name/version/build are the same file: by sha256 when both
    carry one, else by md5; None when they carry no common hash (not checked)."""
    if a.sha256 and b.sha256:
        return a.sha256.lower() == b.sha256.lower()
    if a.md5 and b.md5:
        return a.md5.lower() == b.md5.lower()
    return None


def shadowing(env: Environment, where: str = "") -> list[Finding]:
    """A distribution installed by pip over the same one from conda (pip torch over pytorch)."""
    return [
        _finding(Kind.PIP_SHADOWING, group["conda"], group["pip"], where, group["pip"].name)
        for group in by_key(env.packages).values()
        if "conda" in group and "pip" in group
    ]


def _compare(a: Package, b: Package, where: str) -> list[Finding]:
    """Manager, else version or build, and channel: another channel of a package that
    decides a DDP run (pytorch, nccl, cudatoolkit) is said beside its other version, since
    the two channels build it against other libraries."""
    subject = a.name if a.manager == "conda" else b.name
    if a.manager != b.manager:
        return [_finding(Kind.MANAGER_DIFFERS, a, b, where, subject)]
    out = []
    if a.version != b.version:
        out.append(_finding(Kind.VERSION_DIFFERS, a, b, where, subject))
    elif a.build and b.build and a.build != b.build:
        out.append(_finding(Kind.BUILD_DIFFERS, a, b, where, subject))
    moved = a.channel and b.channel and a.channel != b.channel
    if moved and (a.version == b.version or critical.package(a.name)):
        out.append(_finding(Kind.CHANNEL_DIFFERS, a, b, where, subject))
    if not out and same_artifact(a, b) is False:
        out.append(_finding(Kind.ARTIFACT_DIFFERS, a, b, where, subject))
    return out


def _one_side(a: Group, b: Group, manager: str, where: str) -> list[Finding]:
    """A copy of the key from ``manager`` on one side only, the other managers in common:
    B's pip copy over its conda one is pip shadowing A lacks; A's copy B lacks is missing."""
    if manager in a and manager not in b:
        return [_finding(Kind.MISSING, a[manager], None, where)]
    if manager in b and manager not in a:
        if manager == "pip":
            return [_finding(Kind.PIP_SHADOWING, b["conda"], b["pip"], where, b["pip"].name)]
        return [_finding(Kind.EXTRA, None, b[manager], where)]
    return []


def _compare_groups(a: Group, b: Group, where: str) -> list[Finding]:
    """Each manager both sides have, compared, and a copy one side alone has; no manager in
    common: the manager differs."""
    common = [m for m in ("conda", "pip") if m in a and m in b]
    if not common:
        return _compare(effective(a), effective(b), where)
    out = [f for m in common for f in _compare(a[m], b[m], where)]
    return out + [f for m in ("conda", "pip") for f in _one_side(a, b, m, where)]


def differences(a: Environment, b: Environment, where: str = "") -> list[Finding]:
    """Every way ``b`` differs from ``a`` (the reference), package by package; nothing about
    either on its own (an environment never differs from itself)."""
    left, right = by_key(a.packages), by_key(b.packages)
    findings: list[Finding] = []
    for key in sorted(left.keys() | right.keys()):
        if key not in right:
            findings.append(_finding(Kind.MISSING, effective(left[key]), None, where))
        elif key not in left:
            findings.append(_finding(Kind.EXTRA, None, effective(right[key]), where))
        else:
            findings.extend(_compare_groups(left[key], right[key], where))
    return findings


def diff(a: Environment, b: Environment, where: str = "") -> list[Finding]:
    """The differences of ``b`` from ``a``, and pip shadowing in either (what a node runs
    against the lock); ``where`` names ``b`` in the fix lines, or is empty (the hosts say)."""
    found = differences(a, b, where)  # B's shadowing that A lacks is one of them already
    inside = shadowing(a, a.source if where else "") + shadowing(b, where)
    return found + [f for f in inside if f not in found]


def against_lock(lock: Environment, envs: dict[str, Environment]) -> list[Finding]:
    """Each host's packages against the lock (the reference), tagged with the host. Hosts
    that sent the same records are compared once (the result rests on the records alone: a
    fleet of identical nodes costs one comparison, bench/bench_judge.py); never on a stamp
    or anything else a node says of itself."""
    judged: dict[tuple[Package, ...], list[Finding]] = {}
    out = []
    for host, env in envs.items():
        found = judged.get(env.packages)
        if found is None:
            found = judged[env.packages] = diff(lock, env)
        out += [replace(f, hosts=(host,)) for f in found]
    return out
