"""Nodes compared with each other where no reference decides: a majority, or none (pure).

A value held by more than half of the hosts is the majority: each host without it gets a
finding naming both values. Without one (two nodes that differ, a 2-2 split) nothing is
called the norm: one finding lists every value with its hosts (``spread``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from envtool.judge.findings import Finding, Kind, Severity, Spread

NO_MAJORITY = "no-majority"


def spread(values: Mapping[str, str]) -> Spread:
    """Each distinct value and the hosts that have it, sorted by value."""
    groups: dict[str, list[str]] = {}
    for host, value in values.items():
        groups.setdefault(value, []).append(host)
    return tuple((value, tuple(sorted(hosts))) for value, hosts in sorted(groups.items()))


def majority(values: Mapping[str, str]) -> str | None:
    """The value more than half of the hosts have, if there is one."""
    for value, hosts in spread(values):
        if 2 * len(hosts) > len(values):
            return value
    return None


def differences(
    values: Mapping[str, str],
    kind: Kind,
    severity: Severity,
    subject: str,
    no_majority_kind: Kind | None = None,
) -> list[Finding]:
    """Findings for hosts whose value differs: against the majority, or one for all of them."""
    groups = spread(values)
    if len(groups) <= 1:
        return []
    common = majority(values)
    if common is None:
        hosts = tuple(sorted(values))
        kind = no_majority_kind or kind
        return [Finding(kind, severity, subject, hosts=hosts, spread=groups, cause=NO_MAJORITY)]
    return [
        Finding(kind, severity, subject, common, value, (host,))
        for host, value in values.items()
        if value != common
    ]


def without_hosts(finding: Finding, explained: set[str]) -> Finding | None:
    """``finding`` less the hosts whose difference another finding already explains; None
    when nothing is left to report."""
    if not explained & set(finding.hosts):
        return finding
    if not finding.spread:
        return None if set(finding.hosts) <= explained else finding
    kept = tuple(
        (value, left)
        for value, hosts in finding.spread
        if (left := tuple(h for h in hosts if h not in explained))
    )
    if len(kept) <= 1:
        return None
    hosts = tuple(sorted(h for _, hs in kept for h in hs))
    return replace(finding, hosts=hosts, spread=kept)
