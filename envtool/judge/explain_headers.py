"""What every NCCL process says of itself in its log (its version, the CUDA driver, the
network and plugin chosen, the interfaces, the ``NCCL_*`` variables set), compared across
the hosts as ``verify`` compares nodes: a host unlike the majority is a finding on that host,
a split with no majority one finding listing each value with its hosts. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from envtool.joblog.scan import Event, FileScan, header
from envtool.judge.findings import Finding
from envtool.judge.kinds import Kind
from envtool.judge.rules import severity

NOT_SET = "(not set)"
VERSION = "NCCL version"  # a host that printed it printed its header: its unset NCCL_* count
NAMES = {
    "NCCL version": "NCCL version",
    "cudaDriverVersion": "cudaDriverVersion (the CUDA driver NCCL found)",
    "Using network": "NCCL's network (Using network)",
    "NET/Socket": "NCCL's socket interfaces (NET/Socket)",
    "Bootstrap": "NCCL's bootstrap interface",
    "NET/Plugin": "NCCL's net plugin",
}

Values = dict[str, dict[str, Event]]  # host -> value -> its first line


def _table(scans: Sequence[FileScan]) -> dict[str, Values]:
    out: dict[str, Values] = {}
    for s in scans:
        for e in s.headers:
            if e.origin.host is None:
                continue
            key, value = header(e)
            out.setdefault(key, {}).setdefault(e.origin.host, {}).setdefault(value, e)
    return out


def _said(values: dict[str, Event]) -> str:
    return " | ".join(sorted(values))


def differences(scans: Sequence[FileScan]) -> list[tuple[Finding, Event, tuple[Event, ...]]]:
    """Each difference as (finding, the line of the host unlike the rest, the lines compared)."""
    table = _table(scans)
    printed = set(table.get(VERSION, {}))
    out = []
    for key in sorted(table):
        by_host = {h: _said(v) for h, v in table[key].items()}
        if key.startswith("NCCL_"):
            by_host.update({h: NOT_SET for h in printed - set(by_host)})
        if len(by_host) < 2 or len(set(by_host.values())) < 2:
            continue
        out += _judge(key, by_host, table[key])
    return out


def _judge(
    key: str, by_host: dict[str, str], lines: Values
) -> list[tuple[Finding, Event, tuple[Event, ...]]]:
    spread: dict[str, list[str]] = {}
    for host, value in sorted(by_host.items()):
        spread.setdefault(value, []).append(host)
    subject = key if key.startswith("NCCL_") else NAMES.get(key, key)
    first = [next(iter(v.values())) for _, v in sorted(lines.items())]
    top, hosts = max(spread.items(), key=lambda p: len(p[1]))
    if 2 * len(hosts) > len(by_host):  # a majority: each other host is the finding
        kind = Kind.NCCL_ENV_DIFFERS if key.startswith("NCCL_") else Kind.DIFFERS_FROM_MAJORITY
        out: list[tuple[Finding, Event, tuple[Event, ...]]] = []
        for value, odd in spread.items():
            if value == top:
                continue
            for host in odd:
                mine = lines.get(host)
                line = next(iter(mine.values())) if mine else first[0]
                theirs = next(iter(lines[hosts[0]].values())) if hosts[0] in lines else line
                f = Finding(kind, severity(kind), subject, top, value, (host,))
                out.append((f, line, (line, theirs)))
        return out
    kind = Kind.NCCL_ENV_DIFFERS if key.startswith("NCCL_") else Kind.DIFFERS_BETWEEN_NODES
    told = tuple((v, tuple(h)) for v, h in sorted(spread.items()))
    f = Finding(kind, severity(kind), subject, hosts=tuple(sorted(by_host)), spread=told)
    return [(f, first[0], tuple(first[:8]))]
