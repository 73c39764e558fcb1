"""The NVIDIA driver's records in the kernel log, parsed (no I/O: xid.py reads the log).

A record is the driver's only when the kernel wrote it (facility 0, LOG_KERN: what userspace
writes to ``/dev/kmsg`` gets LOG_USER) *and* its message begins with the driver's prefix
``NVRM: ``. Anyone can make the kernel print text of their choosing inside another message
(``tmpfs: Unknown parameter 'NVRM: Xid (PCI:0000:3b:00): 79'`` from a mount in a user
namespace), so the prefix is looked for at the start only, never inside a message.

The forms the driver writes: ``NVRM: Xid (PCI:0000:3b:00): 79, pid=...`` and the older
``NVRM: Xid (0000:03:00): 13, ...``; a GPU fallen off the bus without an Xid number
(``NVRM: The NVIDIA GPU 0000:b3:00.0`` / ``NVRM: (PCI ID: ...) installed in this system has`` /
``NVRM: fallen off the bus ...``, one record of three lines; ``NVRM: GPU at 0000:01:00.0 has
fallen off the bus.``; ``NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.``): Xid 79's
meaning, kept as ``sub: "unnumbered"``. What an Xid's resolution turns on beyond its code is kept
in ``sub``: the word ``Fatal``/``Nonfatal`` of the NVLink5 Xids 144-150, the recovery action an
Xid 154 changes to (``0x2``: node reboot required).

The records are tallied per code, device and sub (the first, the last and how many since
boot), so no flood of one code (636 Xid 13 in one second) pushes another code's record out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .gpu_device import visible

PREFIX = "NVRM: "
_ADDR = r"(?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?"
XID = re.compile(r"NVRM: Xid \(" + _ADDR + r"\): ([0-9]{1,6})\b")
_ANY = (
    r"(?:PCI:)?((?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?"  # domain or not
)
FALLEN = re.compile(r"NVRM: (?:The NVIDIA )?GPU (?:at )?" + _ANY + r"\b.{0,300}?fallen off the bus")
NVLINK5 = range(144, 151)  # NVLink5 / fabric Xids: their severity word decides
SEVERITY = re.compile(r"\b(Nonfatal|Non-fatal|Fatal)\b")
RECOVERY = re.compile(r"recovery action changed (?:from 0x[0-9A-Fa-f]{1,8} \([^)]{0,40}\) )?"
                      r"to (0x[0-9A-Fa-f]{1,8})")  # fmt: skip
_ESCAPED = re.compile(r"\\x([0-9A-Fa-f]{2})")
# one dmesg --raw line: <PRIO>[seconds] (and a caller id where CONFIG_PRINTK_CALLER is set)
DMESG = re.compile(
    r"<([0-9]{1,4})>(?:\[ *([0-9]{1,10}\.[0-9]{1,9})\])?(?:\[ *[TC][0-9]{1,10}\])? ?"
)
MAX_KEYS = 512  # codes x devices x subs kept; more are counted as dropped
MAX_TEXT = 300

Event = tuple[int, str, str]  # xid, pci (dddd:bb:dd), sub


def pci(text: str) -> str:
    """``PCI:0000:3B:00`` or ``0000:b3:00.0`` → ``0000:3b:00`` (domain:bus:device)."""
    domain, bus, device = ["0", *text.split(":")][-3:]
    return "%04x:%02x:%02x" % (int(domain, 16), int(bus, 16), int(device, 16))


def joined(message: str) -> str:
    """A record's lines as one: each continuation without its indent and ``NVRM: ``."""
    lines = message.split("\n")  # never splitlines(): a \r or \x0b inside is no new line
    rest = [line.strip() for line in lines[1:]]
    rest = [line[len(PREFIX) :] if line.startswith(PREFIX) else line for line in rest]
    return " ".join([lines[0].rstrip()] + [line for line in rest if line])


def _sub(xid: int, text: str) -> str:
    if xid in NVLINK5:
        found = SEVERITY.search(text)
        return "" if found is None else found.group(1).lower().replace("-", "")
    if xid == 154:
        found = RECOVERY.search(text)
        return "" if found is None else "0x%x" % int(found.group(1), 16)
    return ""


def driver_event(text: str) -> Event | None:
    """(xid, pci, sub) that a driver message (already known to be one) reports; None: none."""
    found = XID.match(text)
    if found is not None:
        xid = int(found.group(2))
        return xid, pci(found.group(1)), _sub(xid, text[found.end() :])
    fallen = FALLEN.match(text)
    if fallen is not None:
        return 79, pci(fallen.group(1)), "unnumbered"
    return None


def kmsg_record(record: str) -> tuple[int, int, float, str] | None:
    """(facility, seq, seconds, message) of one ``/dev/kmsg`` record
    (``PRIO,SEQ,USEC,FLAGS[,...];MESSAGE`` then `` KEY=VALUE`` lines); the message's escapes
    (``\\x0a``: a line break inside it) decoded. None when it has not that shape."""
    head, sep, rest = record.partition(";")
    fields = head.split(",")
    if not sep or len(fields) < 3 or not all(_digits(f) for f in fields[:3]):
        return None
    message = rest.split("\n", 1)[0]
    if "\\x" in message:
        message = _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), message)
    return int(fields[0]) >> 3, int(fields[1]), int(fields[2]) / 1e6, message


def _digits(text: str) -> bool:
    return 0 < len(text) <= 20 and text.isascii() and text.isdigit()


def kmsg_lines(text: str) -> Iterator[str]:
    """The records of a saved ``/dev/kmsg`` (one a line, its `` KEY=VALUE`` lines after it)."""
    for line in text.split("\n"):
        if line and not line.startswith(" "):
            yield line


def dmesg_records(text: str) -> Iterator[tuple[int, float | None, str]]:
    """(facility, seconds, message) of each record ``dmesg --raw`` printed: a line
    ``<PRIO>[seconds] message``, and the indented lines after it (dmesg indents a record's
    further lines). A line that is neither belongs to no record and is skipped. (util-linux
    prints the level alone in ``<PRIO>`` when it reads /dev/kmsg: xid.py asks ``--kernel``.)"""
    current: list[Any] | None = None
    for line in text.split("\n"):
        if current is not None and line[:1] in (" ", "\t"):
            current[2] += "\n" + line
            continue
        if current is not None:
            yield current[0], current[1], current[2]
        found = DMESG.match(line)
        current = None
        if found is not None:
            seconds = float(found.group(2)) if found.group(2) else None
            current = [int(found.group(1)) >> 3, seconds, line[found.end() :]]
    if current is not None:
        yield current[0], current[1], current[2]


class Tally:
    """The driver's Xid records of one kernel log by code, device and sub: how many, the
    first and the last (with its time and /dev/kmsg sequence number); at most MAX_KEYS."""

    def __init__(self, most: int = MAX_KEYS) -> None:
        self.most = most
        self.groups: dict[Event, dict[str, Any]] = {}
        self.records = 0  # every record read
        self.ignored = 0  # records naming the driver that are not the driver's
        self.dropped = 0  # driver Xid records of keys beyond MAX_KEYS

    def add(self, facility: int, seq: int | None, seconds: float | None, message: str) -> None:
        """Count one record of the log; only the driver's Xid records are kept."""
        self.records += 1
        if facility != 0 or not message.startswith(PREFIX):
            if "NVRM:" in message:
                self.ignored += 1
            return
        text = joined(message) if "\n" in message else message
        found = driver_event(text)
        if found is None:
            return
        record = {"text": visible(text, MAX_TEXT), "seconds": seconds, "seq": seq}
        group = self.groups.get(found)
        if group is not None:
            group["count"] += 1
            group["last"] = record
        elif len(self.groups) < self.most:
            self.groups[found] = {"count": 1, "first": record, "last": record}
        else:
            self.dropped += 1

    def add_kmsg(self, record: str) -> None:
        """One ``/dev/kmsg`` record; one that does not name the driver is counted, not parsed
        (most of a log: its cost is the floor's)."""
        if "NVRM:" not in record:
            self.records += ";" in record
            return
        found = kmsg_record(record)
        if found is not None:
            self.add(*found)

    def events(self) -> list[dict[str, Any]]:
        """One event per code, device and sub, in the order their first records came."""
        out = []
        for (xid, where, sub), group in self.groups.items():
            first, last = group["first"], group["last"]
            out.append({"xid": xid, "pci": where, "sub": sub, "count": group["count"],
                        "text": last["text"], "seconds": last["seconds"], "seq": last["seq"],
                        "first_text": first["text"], "first_seconds": first["seconds"],
                        "first_seq": first["seq"]})  # fmt: skip
        return out
