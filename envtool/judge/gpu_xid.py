"""A node's Xid records judged (pure): each code by what NVIDIA's catalog says to do first
(judge/xid_catalog.py). The codes an admin acts on (reset the GPU, reboot or drain the node,
contact support) make one ``gpu-xid`` per GPU, drained; the application's (restart it) one
``gpu-xid-application`` per GPU, a note; those to ignore, none. Each finding names the record
that decided it: its code, its time since boot, its /dev/kmsg sequence number, its text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from envtool.judge.findings import Finding, Kind
from envtool.judge.rules import severity
from envtool.judge.xid_catalog import Resolution, meaning, resolution
from envtool.protocol.gpu_types import XidEvent

PciKey = tuple[int, int, int]
# Xids a finding on the same GPU already says (one cause, one finding).
SAID_BY = {Kind.GPU_ECC: {48, 94, 95, 140, 171, 172}, Kind.GPU_ROW_REMAP: {63, 64}}
EXPECTED = {Kind.GPU_XID: "no Xid since boot that needs the node drained",
            Kind.GPU_XID_APP: "no application Xid since boot"}  # fmt: skip


def pci_key(text: str) -> PciKey | None:
    """``00000000:3B:00.0`` and ``PCI:0000:3b:00`` → (0, 0x3b, 0): domain, bus, device."""
    parts = text.removeprefix("PCI:").split(".")[0].split(":")
    try:
        return (
            (int(parts[-3], 16), int(parts[-2], 16), int(parts[-1], 16))
            if len(parts) >= 3
            else None
        )
    except ValueError:
        return None


def merged(events: Iterable[XidEvent]) -> list[XidEvent]:
    """One event per code, device and sub: an older node sent one per record."""
    out: dict[tuple[int, PciKey | str, str], XidEvent] = {}
    for e in events:
        key = (e.xid, pci_key(e.pci) or e.pci, e.sub)
        was = out.get(key)
        if was is None:
            out[key] = e
        else:
            out[key] = XidEvent(e.xid, e.pci, e.text, e.seconds, e.sub, was.count + e.count,
                                e.seq, *_first(was))  # fmt: skip
    return list(out.values())


def _first(e: XidEvent) -> tuple[str, float | None, int | None]:
    """The first record's text, seconds and sequence number (an older node's: its only one)."""
    return (
        (e.first_text, e.first_seconds, e.first_seq) if e.first_text else (e.text, e.seconds, e.seq)
    )


def _record(e: XidEvent) -> str:
    """The deciding record: which code (and what it is), where in the log, its text."""
    where = [f"kernel record {e.seq}"] if e.seq is not None else []
    where += [f"{e.seconds:.3f} s after boot"] if e.seconds is not None else []
    if e.sub == "unnumbered":
        said = "the last record of it, printed without an Xid number (Xid 79's meaning)"
    else:
        words = meaning(e.xid, e.sub)
        said = f"the last Xid {e.xid}" + (f" ({words})" if words else "")
    return said + (f", {', '.join(where)}" if where else "") + f": {e.text}"


def _codes(events: list[XidEvent]) -> str:
    counted = sorted(events, key=lambda e: (e.xid, e.sub))
    return ", ".join(f"Xid {e.xid}" + (f" ({e.count} records)" if e.count > 1 else "")
                     for e in counted)  # fmt: skip


def _finding(kind: Kind, subject: str, events: list[XidEvent], host: str) -> Finding:
    def weight(e: XidEvent) -> tuple[int, float]:
        return resolution(e.xid, e.sub).rank, e.seconds or 0.0

    decided = max(events, key=weight)
    actual = f"{_codes(events)}; {_record(decided)}"
    return Finding(kind, severity(kind), subject, EXPECTED[kind], actual, (host,),
                   cause=resolution(decided.xid, decided.sub).value)  # fmt: skip


def findings(
    events: Iterable[XidEvent], names: Mapping[PciKey | None, str],
    said: Mapping[str, set[Kind]], host: str,
) -> list[Finding]:  # fmt: skip
    """The Xid findings of one node: ``names`` its GPUs by PCI address (a record of a GPU it
    no longer lists is about ``PCI <address>``), ``said`` the kinds already found per GPU."""
    groups: dict[tuple[str, Kind], list[XidEvent]] = {}
    for e in merged(events):
        res = resolution(e.xid, e.sub)
        if res is Resolution.IGNORE:
            continue
        subject = names.get(pci_key(e.pci)) or f"PCI {e.pci or '?'}"
        skip = set().union(*(SAID_BY.get(k, set()) for k in said.get(subject, set())))
        if e.xid not in skip:
            kind = Kind.GPU_XID if res.drains else Kind.GPU_XID_APP
            groups.setdefault((subject, kind), []).append(e)
    return [_finding(kind, subject, found, host) for (subject, kind), found in groups.items()]
