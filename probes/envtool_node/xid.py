"""Xid events in the kernel log since boot (``NVRM: Xid (PCI:0000:3b:00): 79, ...``): the
driver's own record of a GPU fault (79: fallen off the bus; 48, 63, 64, 74, 94, 95: memory
and NVLink errors). Read from ``/dev/kmsg`` without blocking, else from ``dmesg``; where the
log is closed to this user (``kernel.dmesg_restrict``) the part says so instead of guessing."""

from __future__ import annotations

import errno
import os
import re
import shutil
import time
from typing import Any

from .bounded_run import run_all
from .gpu_device import visible

XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]{4,20})\): ([0-9]{1,6})\b")
MAX_EVENTS = 256  # the newest are kept
MAX_RECORDS = 200_000
MAX_BYTES = 32 * 1024 * 1024


def event(text: str, seconds: float | None) -> dict[str, Any] | None:
    """The Xid event a kernel log message records, or None when it records none."""
    found = XID.search(text)
    if found is None:
        return None
    message = text[found.start() :]
    return {"xid": int(found.group(2)), "pci": found.group(1), "text": visible(message, 300),
            "seconds": seconds}  # fmt: skip


def kmsg_record(record: str) -> dict[str, Any] | None:
    """One ``/dev/kmsg`` record (``PRIO,SEQ,USEC,FLAGS;MESSAGE``) as an Xid event, or None."""
    head, sep, message = record.partition(";")
    fields = head.split(",")
    if not sep or len(fields) < 3 or not fields[2].isdigit():
        return None
    return event(message.split("\n", 1)[0], int(fields[2]) / 1e6)


def dmesg_line(line: str) -> dict[str, Any] | None:
    """One ``dmesg`` line (``[ 1234.567890] MESSAGE``) as an Xid event, or None."""
    found = re.match(r"\[\s*([0-9]{1,10}\.[0-9]{1,9})\]", line)
    return event(line, float(found.group(1)) if found else None)


def _kmsg(path: str, deadline_s: float) -> list[dict[str, Any]]:
    """Every Xid record in ``path``; OSError when it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    events: list[dict[str, Any]] = []
    end, total = time.monotonic() + deadline_s, 0
    try:
        for _ in range(MAX_RECORDS):
            try:
                chunk = os.read(fd, 8192)  # one record per read
            except BlockingIOError:
                break  # the end of the log so far
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    continue  # records overwritten while reading: go on with the next
                raise
            total += len(chunk)
            if not chunk or total > MAX_BYTES or time.monotonic() > end:
                break
            found = kmsg_record(chunk.decode("utf-8", "replace"))
            if found is not None:
                events.append(found)
    finally:
        os.close(fd)
    return events[-MAX_EVENTS:]


def _dmesg(deadline_s: float) -> tuple[list[dict[str, Any]] | None, str]:
    dmesg = shutil.which("dmesg")
    if dmesg is None:
        return None, "no dmesg on PATH"
    ran = run_all([[dmesg]], deadline_s)[0]
    text = ran.out.decode("utf-8", "replace")
    if ran.failure is not None or ran.rc != 0:
        first = text.strip().splitlines()[:1] or [ran.failure or ""]
        return None, "dmesg failed: %s" % visible(first[0], 160)
    found = [e for e in map(dmesg_line, text.splitlines()) if e is not None]
    return found[-MAX_EVENTS:], ""


def read(deadline_s: float = 2.0, path: str = "/dev/kmsg") -> dict[str, Any]:
    """The ``xid`` part: ``read``, ``why`` (when not read) and ``events``."""
    try:
        return {"read": True, "why": None, "events": _kmsg(path, deadline_s)}
    except OSError as exc:
        kmsg_why = "%s: %s" % (path, exc.strerror or exc)
    events, dmesg_why = _dmesg(deadline_s)
    if events is not None:
        return {"read": True, "why": None, "events": events}
    return {"read": False, "why": visible("%s; %s" % (kmsg_why, dmesg_why), 300), "events": []}
