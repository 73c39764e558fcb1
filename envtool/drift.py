"""Pure comparison of environments: findings per package, no I/O."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

from envtool.models import Environment, Finding, Package

ERROR, WARNING, INFO = "error", "warning", "info"


def _by_key(packages: Iterable[Package]) -> dict[str, dict[str, Package]]:
    out: dict[str, dict[str, Package]] = {}
    for pkg in packages:
        out.setdefault(pkg.key, {})[pkg.manager] = pkg
    return out


def shadowing(env: Environment) -> list[Finding]:
    """A distribution installed by pip over the same one from conda (pip torch over pytorch)."""
    findings = []
    for group in _by_key(env.packages).values():
        if "conda" in group and "pip" in group:
            conda, pip = group["conda"], group["pip"]
            findings.append(
                Finding(
                    "pip-shadowing",
                    ERROR,
                    pip.name,
                    f"{conda.label()} from conda only",
                    f"pip {pip.label()} shadows conda {conda.label()} in {env.source}",
                    f"pip uninstall {pip.name}",
                )
            )
    return findings


def _effective(group: dict[str, Package]) -> Package:
    """What ``import`` finds: pip's copy shadows conda's."""
    return group.get("pip") or group["conda"]


def _compare(a: Package, b: Package, where: str) -> list[Finding]:
    subject = a.name if a.manager == "conda" else b.name
    if a.manager != b.manager:
        return [
            Finding(
                "manager-differs",
                ERROR,
                subject,
                f"{a.manager} {a.label()}",
                f"{b.manager} {b.label()}",
                f"install {subject} with {a.manager} {where}",
            )
        ]
    if a.version != b.version:
        return [
            Finding(
                "version-differs",
                ERROR,
                subject,
                a.label(),
                b.label(),
                f"install {a.label()} {where}",
            )
        ]
    out = []
    if a.build and b.build and a.build != b.build:
        out.append(
            Finding(
                "build-differs",
                ERROR,
                subject,
                a.label(),
                b.label(),
                f"install {a.label()} {where}",
            )
        )
    if a.channel and b.channel and a.channel != b.channel:
        out.append(
            Finding(
                "channel-differs",
                WARNING,
                subject,
                f"{a.label()} from {a.channel}",
                f"{b.label()} from {b.channel}",
                f"install {subject} from {a.channel}",
            )
        )
    return out


def _compare_groups(a: dict[str, Package], b: dict[str, Package], where: str) -> list[Finding]:
    """Same manager on both sides: compare those; else the manager differs."""
    for manager in ("conda", "pip"):
        if manager in a and manager in b:
            return _compare(a[manager], b[manager], where)
    return _compare(_effective(a), _effective(b), where)


def diff(a: Environment, b: Environment) -> list[Finding]:
    """Every way ``b`` differs from ``a`` (the reference), and pip shadowing in either."""
    where = f"in {b.source}"
    left, right = _by_key(a.packages), _by_key(b.packages)
    findings: list[Finding] = []
    for key in sorted(left.keys() | right.keys()):
        if key not in right:
            pkg = _effective(left[key])
            findings.append(
                Finding(
                    "missing",
                    ERROR,
                    pkg.name,
                    pkg.label(),
                    "absent",
                    f"install {pkg.label()} {where}",
                )
            )
        elif key not in left:
            pkg = _effective(right[key])
            findings.append(
                Finding(
                    "extra",
                    WARNING,
                    pkg.name,
                    "absent",
                    pkg.label(),
                    f"remove {pkg.name} {where} if it is not needed",
                )
            )
        else:
            findings.extend(_compare_groups(left[key], right[key], where))
    return findings + shadowing(a) + shadowing(b)


def worst(findings: Iterable[Finding]) -> str | None:
    """The highest severity among findings, None when there are none."""
    order = {ERROR: 0, WARNING: 1, INFO: 2}
    ranked = sorted((f.severity for f in findings), key=lambda s: order.get(s, 3))
    return ranked[0] if ranked else None


def against_lock(lock: Environment, envs: dict[str, Environment]) -> list[Finding]:
    """Each host's packages against the lock (the reference), tagged with the host."""
    out = []
    for host, env in envs.items():
        for f in diff(lock, env):
            out.append(
                replace(
                    f,
                    hint=f.hint.replace(f" in {env.source}", ""),
                    actual=f.actual.replace(f" in {env.source}", ""),
                    hosts=(host,),
                )
            )
    return out


def against_majority(envs: dict[str, Environment], lock: Environment | None) -> list[Finding]:
    """Where the lock is silent: a host whose package differs from what most hosts have."""
    if len(envs) < 2:
        return []
    locked = set(_by_key(lock.packages)) if lock is not None else set()
    labels: dict[str, dict[str, str]] = {}
    for host, env in envs.items():
        for key, group in _by_key(env.packages).items():
            if key not in locked:
                labels.setdefault(key, {})[host] = _effective(group).label()
    out = []
    for key, per_host in sorted(labels.items()):
        values = [per_host.get(h, "absent") for h in envs]
        common, count = Counter(values).most_common(1)[0]
        if count == len(values):
            continue
        for host in envs:
            mine = per_host.get(host, "absent")
            if mine != common:
                out.append(
                    Finding(
                        "differs-from-majority",
                        WARNING,
                        key,
                        common,
                        mine,
                        f"make {key} match the other nodes",
                        (host,),
                    )
                )
    return out


def fold(findings: Iterable[Finding]) -> list[Finding]:
    """Merge findings that differ only by host into one (like clush -b)."""
    merged: dict[Finding, list[str]] = {}
    for f in findings:
        merged.setdefault(replace(f, hosts=()), []).extend(f.hosts)
    return [replace(f, hosts=tuple(sorted(set(hosts)))) for f, hosts in merged.items()]
