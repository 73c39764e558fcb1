"""The words of the network findings whose fix depends on what the node has (the rest use
their row's fix line, judge/rules_network.py); report/labels.py asks here first."""

from __future__ import annotations

from envtool.judge.findings import Finding, Kind


def net_words(f: Finding) -> tuple[str, str, str] | None:
    """(expected, actual, fix) of an interface variable that selects nothing; else None."""
    if f.kind is not Kind.IFNAME_UNMATCHED:
        return None
    syntax = " (NCCL: eth, =eth0, ^docker)" if f.subject.startswith("NCCL_") else ""
    fix = f"set {f.subject} to one of the node's interfaces{syntax}, or unset it"
    return f"{f.expected} selecting an interface", f"the node has {f.actual}", fix
