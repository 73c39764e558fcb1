"""Nodes compared with each other where no reference decides: a majority, or none (pure).

A value held by more than half of the hosts is the majority: each host without it gets a
finding naming both values. Without one (two nodes that differ, a 2-2 split) nothing is
called the norm: one finding lists every value with its hosts (``spread``).

Names that reach one machine (an alias, a name and its address) are that machine once: one
``same-machine`` finding names them, and in a majority a machine has one vote, shared among its
names. Each name is still judged on its own answer, so a node that claims another's ids can
split that machine's vote but never take the other node's findings away.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from fractions import Fraction

from envtool.judge.findings import Finding, Kind, Severity, Spread
from envtool.judge.rules import severity
from envtool.protocol.types import HostReport, NodeFacts

NO_MAJORITY = "no-majority"
Machines = Mapping[str, str]  # host → the machine it answered from (its first name)
_Identity = tuple[str, str, str]  # hostname, boot id, machine-id ("" when not told apart)


def _identity(facts: NodeFacts | None) -> tuple[str, str] | None:
    """What names a machine: its hostname and boot id (containers have their own hostname)."""
    if facts is None or not facts.hostname or not facts.boot_id:
        return None
    return facts.hostname, facts.boot_id


def machine_groups(reports: Sequence[HostReport]) -> tuple[tuple[str, ...], ...]:
    """The hosts grouped by the machine they answered from, in the reports' order: one
    hostname and boot id, and one machine-id where they send one (two machine-ids under one
    hostname and boot id are two machines, and a host without one then stands alone); a
    host whose answer says neither is a machine of its own."""
    ids: dict[tuple[str, str], set[str]] = {}
    for r in reports:
        if r.facts is not None and (key := _identity(r.facts)) is not None:
            ids.setdefault(key, set()).add(r.facts.machine_id)
    groups: dict[_Identity | str, list[str]] = {}
    for r in reports:
        group: _Identity | str = r.host
        if r.facts is not None and (key := _identity(r.facts)) is not None:
            mid = r.facts.machine_id
            if len(ids[key] - {""}) <= 1:
                group = (*key, "")
            elif mid:
                group = (*key, mid)
        groups.setdefault(group, []).append(r.host)
    return tuple(tuple(hosts) for hosts in groups.values())


def machines(reports: Sequence[HostReport]) -> dict[str, str]:
    """Each host → the machine it answered from, named by its group's first host."""
    return {h: hosts[0] for hosts in machine_groups(reports) for h in hosts}


def same_machine(reports: Sequence[HostReport]) -> list[Finding]:
    """One ``same-machine`` finding per machine reached under several names."""
    facts = {r.host: r.facts for r in reports if r.facts is not None}
    out = []
    for hosts in machine_groups(reports):
        if len(hosts) < 2:
            continue
        f = facts[hosts[0]]
        mid = f" machine-id {f.machine_id}," if f.machine_id else ""
        said = f"one machine (hostname {f.hostname},{mid} boot id {f.boot_id})"
        kind = Kind.SAME_MACHINE
        out.append(Finding(kind, severity(kind), f.hostname, "one name per machine",
                           f"{', '.join(hosts)}: {said}", tuple(hosts)))  # fmt: skip
    return out


def spread(values: Mapping[str, str]) -> Spread:
    """Each distinct value and the hosts that have it, sorted by value."""
    groups: dict[str, list[str]] = {}
    for host, value in values.items():
        groups.setdefault(value, []).append(host)
    return tuple((value, tuple(sorted(hosts))) for value, hosts in sorted(groups.items()))


def majority(values: Mapping[str, str], machines: Machines | None = None) -> str | None:
    """The value more than half of the machines have, if there is one: each machine one
    vote, shared among the names that reached it (``machines``; a host not in it is its own)."""
    where = {h: (machines or {}).get(h, h) for h in values}
    names = {m: sum(1 for w in where.values() if w == m) for m in set(where.values())}
    for value, hosts in spread(values):
        votes = sum(Fraction(1, names[where[h]]) for h in hosts)
        if 2 * votes > len(names):
            return value
    return None


def differences(
    values: Mapping[str, str],
    kind: Kind,
    severity: Severity,
    subject: str,
    no_majority_kind: Kind | None = None,
    machines: Machines | None = None,
) -> list[Finding]:
    """Findings for hosts whose value differs: against the majority (of ``machines``, each
    counted once), or one for all of them."""
    groups = spread(values)
    if len(groups) <= 1:
        return []
    common = majority(values, machines)
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
