"""``envtool explain``: the initiating event of a failed job, from its logs' signs. Pure.

The failure lines of every file are ranked by the precedence of their sign (a CUDA or
environment cause first, then a failure without its cause, then the watchdog's timeouts,
then the teardown) and by their place in the logs; the first is the initiating event, the
others follow from it (counted, by sign). A cause sign becomes a finding of envtool's own
kinds (``shm-small``, ``gpu-ecc-uncorrectable``, ...) with its evidence; anything else is
``cause-not-established`` with the line that comes first, and the watchdog's timeouts as
``collective-timeout``: which ranks reported which collective.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from envtool.errors import EXIT_NOT_ESTABLISHED, EXIT_OK, EXIT_PROBLEMS
from envtool.joblog.scan import Event, FileScan
from envtool.joblog.signs import Sign, Tier
from envtool.judge import xid_catalog
from envtool.judge.explain_headers import differences
from envtool.judge.findings import Finding
from envtool.judge.kinds import Kind, Severity
from envtool.judge.rules import severity

MAX_EVIDENCE = 16  # evidence lines a finding carries (the rest counted in ``lines``)

CAUSES: dict[Sign, Kind] = {
    Sign.XID: Kind.GPU_XID,
    Sign.ECC: Kind.GPU_ECC,
    Sign.NO_KERNEL_IMAGE: Kind.GPU_ARCH_UNSUPPORTED,
    Sign.ARCH_UNSUPPORTED: Kind.GPU_ARCH_UNSUPPORTED,
    Sign.DRIVER_OLD: Kind.DRIVER_TOO_OLD,
    Sign.SHM: Kind.SHM_SMALL,
    Sign.GLOO_LOOPBACK: Kind.GLOO_LOOPBACK,
    Sign.IFNAME: Kind.IFNAME_UNMATCHED,
    Sign.MISMATCH: Kind.COLLECTIVE_MISMATCH,
    Sign.IB_QP: Kind.IB_QP_ERROR,
    Sign.IB_COMPLETION: Kind.IB_COMPLETION_ERROR,
}
# the context lines that complete a cause's evidence
_CONTEXT: dict[Kind, frozenset[Sign]] = {
    Kind.GPU_ARCH_UNSUPPORTED: frozenset({Sign.ARCH_LIST}),
    Kind.SHM_SMALL: frozenset({Sign.SHM_PATH, Sign.SIGBUS}),
    Kind.GLOO_LOOPBACK: frozenset({Sign.SOCKET}),
    Kind.IB_QP_ERROR: frozenset({Sign.IB_DEVICE}),
    Kind.IB_COMPLETION_ERROR: frozenset({Sign.IB_DEVICE}),
}


class Status(str, enum.Enum):
    """What the logs establish."""

    NO_FAILURE = "no-failure"
    CAUSE = "cause"
    NOT_ESTABLISHED = "not-established"
    DIFFERS = "differs"  # no failure in the logs, but the hosts' NCCL headers differ


@dataclass(frozen=True)
class Explained:
    """A finding with its evidence; ``lead`` is the line a verdict cites."""

    finding: Finding
    lead: Event
    evidence: tuple[Event, ...]
    lines: int  # lines of its signs in the logs (evidence keeps the first MAX_EVIDENCE)


@dataclass(frozen=True)
class JobVerdict:
    """The logs' verdict: a cause, a failure without an established one, or no failure."""

    status: Status
    findings: tuple[Explained, ...] = ()  # the cause (or cause-not-established) first
    cascade: tuple[tuple[Sign, int], ...] = ()  # the other failure lines, by sign
    silent: tuple[int, ...] = ()  # ranks the logs name that reported no timeout
    silent_on: tuple[tuple[int, str], ...] = ()  # (rank, host) of those a prefix placed

    @property
    def exit_code(self) -> int:
        """0 no failure, 1 a cause named, 4 a failure with no established cause."""
        return {
            Status.NO_FAILURE: EXIT_OK,
            Status.CAUSE: EXIT_PROBLEMS,
            Status.DIFFERS: EXIT_PROBLEMS,
        }.get(self.status, EXIT_NOT_ESTABLISHED)


def _events(scans: Sequence[FileScan]) -> list[tuple[int, Event]]:
    return [(i, e) for i, s in enumerate(scans) for e in s.events]


def _tier(event: Event, shm_said: set[int], index: int) -> Tier:
    """A SIGBUS is a cause (a full /dev/shm) only where its file says /dev/shm too; an Xid by
    NVIDIA's catalog: the application's (13, 31, 43) a failure without its cause, a cleanup
    after another (45) or a non-fatal NVLink5 unit error nothing, the rest a cause."""
    if event.sign is Sign.SIGBUS and index in shm_said:
        return Tier.CAUSE
    return _xid_tier(event) if event.sign is Sign.XID else event.sign.tier


def _xid_tier(event: Event) -> Tier:
    xid, sub = int(event.get("xid") or 0), event.get("sub") or ""
    if xid_catalog.resolution(xid, sub) is xid_catalog.Resolution.IGNORE:
        return Tier.CONTEXT
    return Tier.FAILURE if xid_catalog.application(xid, sub) else Tier.CAUSE


def _kind(event: Event) -> Kind | None:
    return Kind.SHM_SMALL if event.sign is Sign.SIGBUS else CAUSES.get(event.sign)


def _subject(kind: Kind, lead: Event, evidence: Sequence[Event]) -> str:
    if kind is Kind.GPU_ARCH_UNSUPPORTED:
        said = next((c for e in evidence if (c := e.get("capability"))), None)
        return said or "GPU"
    if kind is Kind.IB_QP_ERROR:
        devices = [d for e in evidence if e.sign is Sign.IB_DEVICE and (d := e.get("devices"))]
        named = devices[0].split() if devices else []
        return named[0].partition("]")[2].split(":")[0] if len(named) == 1 else "IB"
    if kind is Kind.COLLECTIVE_MISMATCH:
        return f"peer {lead.get('peer')}" if lead.get("peer") else "collective"
    if kind is Kind.GPU_XID:
        return f"GPU {lead.get('pci')}"
    if kind is Kind.IB_COMPLETION_ERROR:
        return f"peer {lead.get('peer')}" if lead.get("peer") else "IB"
    if kind is Kind.IFNAME_UNMATCHED:
        return "GLOO_SOCKET_IFNAME" if lead.get("interface") else "NCCL_SOCKET_IFNAME"
    if kind is Kind.GPU_ECC:
        return f"GPU {lead.origin.gpu}" if lead.origin.gpu is not None else "GPU"
    names = {
        Kind.SHM_SMALL: "/dev/shm",
        Kind.DRIVER_TOO_OLD: "NVIDIA driver",
        Kind.GLOO_LOOPBACK: "GLOO_SOCKET_IFNAME",
    }
    return names.get(kind, "the job")


def _finding(kind: Kind, lead: Event, evidence: Sequence[Event], cause: str = "") -> Finding:
    hosts = tuple(sorted({e.origin.host for e in evidence if e.origin.host}))
    return Finding(kind, severity(kind), _subject(kind, lead, evidence), hosts=hosts, cause=cause)


def _explained(kind: Kind, lead: Event, pool: Sequence[Event], signs: frozenset[Sign]) -> Explained:
    same = [e for e in pool if e.sign in signs]
    if kind is Kind.GPU_XID:  # the hardware Xids, not the application's beside them
        same = [e for e in same if _xid_tier(e) is Tier.CAUSE]
    context = [e for e in pool if e.sign in _CONTEXT.get(kind, frozenset()) and e not in same]
    if kind in (Kind.IB_QP_ERROR, Kind.IB_COMPLETION_ERROR):  # the HCA of the failing host
        context = [e for e in context if e.origin.host == lead.origin.host]
    evidence = sorted({*same[:MAX_EVIDENCE], *context[:4]}, key=lambda e: (e.file, e.line))
    return Explained(
        _finding(kind, lead, evidence, lead.sign.value), lead, tuple(evidence), len(same)
    )


TIMEOUTS = frozenset({Sign.WATCHDOG, Sign.GLOO_TIMEOUT})  # NCCL's watchdog, gloo's own


def _timeouts(events: Sequence[Event]) -> Explained | None:
    waits = [e for e in events if e.sign in TIMEOUTS]
    if not waits:
        return None
    lead = min(waits, key=lambda e: (e.sign.rank, int(e.get("seq") or 0)))
    f = _explained(Kind.COLLECTIVE_TIMEOUT, lead, waits, TIMEOUTS)
    op = lead.get("op") or "collective"
    if lead.sign is Sign.GLOO_TIMEOUT:
        subject = "a gloo collective"
    else:
        subject = f"{op} SeqNum={lead.get('seq')}" if lead.get("seq") else op
    return Explained(
        Finding(f.finding.kind, f.finding.severity, subject, hosts=f.finding.hosts),
        lead,
        f.evidence,
        f.lines,
    )


def _differences(scans: Sequence[FileScan]) -> tuple[list[Explained], list[Explained]]:
    """The hosts' header differences: (errors, warnings)."""
    found = [Explained(f, lead, lines, len(lines)) for f, lead, lines in differences(scans)]
    errors = [f for f in found if f.finding.severity is Severity.ERROR]
    return errors, [f for f in found if f not in errors]


def decide(scans: Sequence[FileScan]) -> JobVerdict:
    """The initiating event of the logs, its evidence, and what follows from it. A cause
    comes first; else a host whose NCCL header differs from the others' (its version,
    driver, network, interface) is the cause; else the failure is not established."""
    indexed = _events(scans)
    shm_said = {i for i, e in indexed if e.sign in (Sign.SHM_PATH, Sign.SHM)}
    failures = [(i, e) for i, e in indexed if _tier(e, shm_said, i) < Tier.CONTEXT]
    errors, warnings = _differences(scans)
    if not failures:
        status = Status.DIFFERS if errors else Status.NO_FAILURE
        return JobVerdict(status, (*errors, *warnings))
    index, lead = min(
        failures, key=lambda p: (_tier(p[1], shm_said, p[0]), p[1].sign.rank, p[0], p[1].line)
    )
    pool = [e for _, e in indexed]
    kind = _kind(lead) if _tier(lead, shm_said, index) is Tier.CAUSE else None
    waits = _timeouts(pool)
    if kind is not None:
        signs = frozenset(s for s, k in CAUSES.items() if k is kind) | {lead.sign}
        found: tuple[Explained, ...] = (_explained(kind, lead, pool, signs), *errors)
        status = Status.CAUSE
    elif errors:
        found = (*errors, *((waits,) if waits is not None else ()))
        status = Status.CAUSE
    else:
        same = [e for e in pool if e.sign is lead.sign][:4]  # the timeouts: their own finding
        found = (_explained(Kind.CAUSE_NOT_ESTABLISHED, lead, same, frozenset({lead.sign})),)
        found += (waits,) if waits is not None else ()
        status = Status.NOT_ESTABLISHED
    found += tuple(warnings)
    silent = _silent(scans, pool)
    return JobVerdict(status, found, _cascade(scans, found), silent, _placed(scans, silent))


def _cascade(scans: Sequence[FileScan], found: Sequence[Explained]) -> tuple[tuple[Sign, int], ...]:
    shown = {e.sign for f in found for e in f.evidence}
    total: dict[Sign, int] = {}
    for s in scans:
        for sign, n in s.counts:
            if sign.tier < Tier.CONTEXT and sign not in shown:
                total[sign] = total.get(sign, 0) + n
    return tuple(sorted(total.items(), key=lambda p: p[0].rank))


def _silent(scans: Sequence[FileScan], pool: Sequence[Event]) -> tuple[int, ...]:
    reported = {r for s in scans for r in s.waited}  # every one, not only the kept lines
    reported |= {e.origin.rank for e in pool if e.sign in TIMEOUTS and e.origin.rank is not None}
    if not reported:
        return ()
    named = {r for s in scans for r in s.ranks}
    return tuple(sorted(named - reported))


def _placed(scans: Sequence[FileScan], ranks: Sequence[int]) -> tuple[tuple[int, str], ...]:
    """The host a prefix gave each of ``ranks`` (the first file's that names one)."""
    want, out = set(ranks), dict[int, str]()
    for s in scans:
        for rank, host in s.rank_hosts:
            if rank in want:
                out.setdefault(rank, host)
    return tuple(sorted(out.items()))
