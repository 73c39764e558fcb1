"""The rendezvous from every node (pure): the rendezvous host must resolve on every node, to
one and the same address that is not loopback (on the node that hosts the store too), and
its port must take a connection from every node while envtool listens there
(envtool_node/reach.py); a node whose connects came only while nobody listened (its start, or
the store node's, lagged past the window) was not checked, and is said so. One cause, one
finding: a node whose name lookup is already wrong is not also named unreachable, and across
nodes (``--allreduce cluster``) these findings explain the run's failed all-reduce."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import replace

from envtool.judge import consensus
from envtool.judge.findings import Finding, Kind
from envtool.judge.rules import severity
from envtool.protocol import schemas
from envtool.protocol.rdzv_types import RendezvousCheck
from envtool.protocol.types import HostReport

# what makes a cross-node all-reduce fail on every node (explain_cluster)
CAUSES = (Kind.RDZV_UNRESOLVABLE, Kind.RDZV_LOOPBACK, Kind.RDZV_ADDRESS_DIFFERS,
          Kind.RDZV_UNREACHABLE)  # fmt: skip


def loopback(address: str) -> bool:
    """127.0.0.0/8, ::1 (and an IPv4-mapped loopback)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


def _finding(kind: Kind, subject: str, expected: str, actual: str, host: str) -> Finding:
    return Finding(kind, severity(kind), subject, expected, actual, (host,))


def _one_machine(checks: dict[str, RendezvousCheck]) -> bool:
    """Every node resolved the same loopback address and every connect there went through:
    the nodes share one machine (test nodes on 127.0.0.x), where loopback is reachable."""
    seen = {c.addresses for c in checks.values()}
    if len(seen) != 1 or not all(loopback(a) for a in next(iter(seen))):
        return False
    connects = [c.reach for c in checks.values() if c.nodes >= 2]
    return all(r is not None and r.ok for r in connects)


def _names(checks: dict[str, RendezvousCheck]) -> tuple[list[Finding], set[str]]:
    """Unresolvable, loopback and differing addresses; the hosts they name."""
    out: list[Finding] = []
    for host, c in checks.items():
        if not c.addresses:
            why = c.error or "no address"
            out.append(_finding(Kind.RDZV_UNRESOLVABLE, c.host, "resolves", why, host))
    resolved = {h: c for h, c in checks.items() if c.addresses}
    if not _one_machine(resolved):
        for host, c in resolved.items():
            looped = [a for a in c.addresses if loopback(a)]
            if looped:
                actual = ", ".join(looped)
                out.append(_finding(Kind.RDZV_LOOPBACK, c.host, "an address other nodes reach",
                                    actual, host))  # fmt: skip
    named = {h for f in out for h in f.hosts}
    values = {h: ", ".join(sorted(c.addresses)) for h, c in resolved.items() if h not in named}
    kind = Kind.RDZV_ADDRESS_DIFFERS
    subject = next(iter(checks.values())).host
    out += consensus.differences(values, kind, severity(kind), subject, kind)
    return out, {h for f in out for h in f.hosts}


def _port_taken(r: HostReport, c: RendezvousCheck) -> list[Finding]:
    """The port held on the store's node, unless its all-reduce already says so."""
    if c.listen is None or c.listen.cause != schemas.CAUSE_PORT_TAKEN:
        return []
    if r.allreduce is not None and r.allreduce.cause == schemas.CAUSE_PORT_TAKEN:
        return []  # gpu.port_taken's finding: one cause, one finding
    expected = f"port {c.port} free for envtool's store"
    return [_finding(Kind.RDZV_PORT_TAKEN, "rendezvous", expected, c.listen.error, r.host)]


Span = tuple[float, float]
Offset = tuple[float, float]  # HostReport.clock_offset: (node clock - ours, ± bound)


def missed(
    opened: Span | None, store: Offset | None, tried: Span | None, peer: Offset | None
) -> float:
    """Seconds by which a node's connects certainly missed the store's listening, on this
    machine's clock (each node's span less its clock offset, both offsets' bounds allowed
    for): > 0 they all came after it closed, < 0 all before it opened, 0 they may have met
    (or a span or an offset is unknown: an older node, judged as before)."""
    if opened is None or tried is None or store is None or peer is None:
        return 0.0
    slack = store[1] + peer[1]
    after = (tried[0] - peer[0]) - (opened[1] - store[0])
    before = (opened[0] - store[0]) - (tried[1] - peer[0])
    if after > slack:
        return after
    return -before if before > slack else 0.0  # fmt: skip


SLACK = 0.5  # seconds: the node's clock reading and our own timestamps' rounding


def trusted(span: Span | None, r: HostReport) -> Span | None:
    """A span on ``r``'s clock, as long as it fits, on this machine's clock (its offset and
    bound allowed for), inside the time its transport ran: what a node did while it ran. A
    span that cannot have happened then (its clock entry shifted, or the span) is None:
    unknown, so no other node's finding rests on that node's clock (issue 33 item 3)."""
    if span is None or r.started <= 0 or r.clock_offset is None:
        return span  # nothing to hold it against (an older answer, a hand-made report)
    offset, bound = r.clock_offset
    low, high = r.started - bound - SLACK, r.started + r.seconds + bound + SLACK
    return span if low <= span[0] - offset and span[1] - offset <= high else None


def _late(where: str, store: str, gaps: dict[str, float]) -> list[Finding]:
    """The nodes whose connects missed the listening: each that came after it closed, or
    the store's node where every one of them gave up before it opened."""
    expected = "connects while envtool listened there"
    early = sorted(h for h, gap in gaps.items() if gap < 0)
    out = [_finding(Kind.RDZV_LATE, where, expected,
                    f"its connects began {gap:.1f} s after the port closed: not checked", host)
           for host, gap in gaps.items() if gap > 0]  # fmt: skip
    if early:
        gap = min(-gaps[h] for h in early)
        names = ", ".join(early[:3]) + (f" and {len(early) - 3} more" if len(early) > 3 else "")
        actual = f"it opened the port {gap:.1f} s after {names} stopped trying: not checked"
        out.append(_finding(Kind.RDZV_LATE, where, expected, actual, store))
    return out


def _unreachable(
    reports: Sequence[HostReport], checks: dict[str, RendezvousCheck], store: str,
    named: set[str],
) -> list[Finding]:  # fmt: skip
    """Each node whose connect failed while the store's node listened; a node whose
    connects certainly missed the listening is rendezvous-late instead (not checked)."""
    c = checks[store]
    where = f"{store}:{c.port}"
    by_host = {r.host: r for r in reports}
    offsets = {r.host: r.clock_offset for r in reports}
    opened = trusted(c.listen.open if c.listen is not None else None, by_host[store])
    out, gaps = [], {}
    for host, mine in checks.items():
        reach = mine.reach
        if host in named or reach is None or reach.ok:
            continue
        tried = trusted(reach.tried, by_host[host])
        gap = missed(opened, offsets.get(store), tried, offsets.get(host))
        if gap:
            gaps[host] = gap
            continue
        actual = f"{reach.error} (to {reach.address}:{c.port})"
        out.append(_finding(Kind.RDZV_UNREACHABLE, where, f"a connection from {host}", actual,
                            host))  # fmt: skip
    return out + _late(where, store, gaps)


def _strangers(r: HostReport, c: RendezvousCheck) -> list[Finding]:
    """Connections to the store's port that did not carry this run's token: said on the
    store's node, never counted as nodes."""
    n = c.listen.strangers if c.listen is not None else 0
    if not n:
        return []
    actual = f"{n} connection{'s' if n != 1 else ''} without this run's token"
    return [_finding(Kind.RDZV_STRANGERS, f"{r.host}:{c.port}", "only this run's nodes",
                     actual, r.host)]  # fmt: skip


def check(reports: Sequence[HostReport]) -> list[Finding]:
    """The rendezvous findings over every node that checked it."""
    checks = {r.host: r.rendezvous for r in reports if r.rendezvous is not None}
    if not checks:
        return []
    out, named = _names(checks)
    for r in reports:
        c = r.rendezvous
        if c is None or not c.is_host or c.listen is None:
            continue
        out += _port_taken(r, c) + _strangers(r, c)
        if c.listen.ok:
            out += _unreachable(reports, checks, r.host, named)
    return out


def _explain_pairs(found: list[Finding], accepted: frozenset[Kind]) -> list[Finding]:
    """Pair by pair, a node that could not connect to the store's node explains the failed
    all-reduce of the pair of those two nodes (the same link: a cut cable, a firewall
    between them); it is dropped and counted on the rendezvous finding."""
    cut: dict[frozenset[str], Finding] = {}
    for f in found:
        if f.kind is Kind.RDZV_UNREACHABLE and f.kind not in accepted:
            store = f.subject.rpartition(":")[0]
            cut.update({frozenset((store, host)): f for host in f.hosts if host != store})
    counts: dict[int, int] = {}
    out = []
    for f in found:
        cause = cut.get(frozenset(f.hosts)) if f.kind is Kind.ALLREDUCE_FAILED else None
        if cause is not None and len(f.hosts) == 2 and " <-> " in f.subject:
            counts[id(cause)] = counts.get(id(cause), 0) + 1
            continue
        out.append(f)
    return [replace(f, follows=f.follows + counts[id(f)]) if id(f) in counts else f for f in out]


def explain_cluster(
    found: list[Finding], mode: str, accepted: frozenset[Kind] = frozenset()
) -> list[Finding]:
    """Across nodes, a rendezvous finding explains the run's failed all-reduce on every node
    (its ``allreduce-failed`` findings are dropped and counted on the first cause); pair by
    pair, an unreachable port explains the failed pair of those two nodes; per node the
    all-reduces do not use this rendezvous, and stay. A kind the policy accepts explains
    nothing (findings.explain)."""
    if mode in ("pairs", "bisect"):
        return _explain_pairs(found, accepted)
    causes = [i for i, f in enumerate(found) if f.kind in CAUSES and f.kind not in accepted]
    if mode != "cluster" or not causes:
        return found
    first = found[causes[0]]
    out = [f for f in found if not (f.kind is Kind.ALLREDUCE_FAILED and f.subject == "all-reduce")]
    dropped = len(found) - len(out)
    return [replace(f, follows=f.follows + dropped) if f is first else f for f in out]
