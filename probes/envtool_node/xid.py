"""The ``xid`` part: the NVIDIA driver's Xid records in the kernel log since boot (the
driver's own record of a GPU fault), read from ``/dev/kmsg`` without blocking, else from
``dmesg --kernel --raw``; where the log is closed to this user (``kernel.dmesg_restrict``) the part
says so instead of guessing. Which record is the driver's, and the tally by code and device:
xid_parse.py. What each code means and what to do about it is envtool's to say
(envtool/judge/xid_catalog.py): the node only reads.

The log read is a parameter: ``read(path=...)``, or the path in ``ENVTOOL_KERNEL_LOG`` (a file of
``/dev/kmsg`` records, or another device), read instead of this machine's log and with no
dmesg after it: how the tests give every node a kernel log of their own."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import time
from typing import Any, Callable

from .bounded_run import run_all
from .gpu_device import visible
from .xid_parse import Tally, dmesg_records, kmsg_lines

KMSG = "/dev/kmsg"
VARIABLE = "ENVTOOL_KERNEL_LOG"
MAX_RECORDS = 400_000
MAX_BYTES = 64 * 1024 * 1024


def _part(source: str, tally: Tally, partial: str | None) -> dict[str, Any]:
    return {"read": True, "why": None, "source": source, "records": tally.records,
            "ignored": tally.ignored, "dropped": tally.dropped, "partial": partial,
            "events": tally.events()}  # fmt: skip


def _device(fd: int, tally: Tally, end: float) -> str | None:
    """Every record of a /dev/kmsg device, one per read; why it stopped early, if it did."""
    return read_kmsg(fd, end, tally.add_kmsg)


def read_kmsg(fd: int, end: float, each: Callable[[str], None]) -> str | None:
    """Hand ``each`` every record of a /dev/kmsg device (one per read), bounded by
    MAX_RECORDS, MAX_BYTES and the monotonic deadline ``end``; why it stopped early, if it
    did (envtool collect reads the device with it too)."""
    total = 0
    for n in range(MAX_RECORDS):
        try:
            chunk = os.read(fd, 8192)  # one record per read
        except BlockingIOError:
            return None  # the end of the log so far
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                continue  # records overwritten while reading: go on with the next
            raise
        total += len(chunk)
        if not chunk:
            return None
        if total > MAX_BYTES:
            return "stopped after %d MiB" % (MAX_BYTES >> 20)
        if n % 1024 == 0 and time.monotonic() > end:
            return "stopped after %d records at the deadline" % n
        each(chunk.decode("utf-8", "replace"))
    return "stopped after %d records" % MAX_RECORDS


def _saved(fd: int, tally: Tally) -> str | None:
    """Every record of a saved /dev/kmsg (a regular file, one record a line)."""
    data = os.read(fd, MAX_BYTES + 1)
    for n, line in enumerate(kmsg_lines(data[:MAX_BYTES].decode("utf-8", "replace"))):
        if n >= MAX_RECORDS:
            return "stopped after %d records" % MAX_RECORDS
        tally.add_kmsg(line)
    return "stopped after %d MiB" % (MAX_BYTES >> 20) if len(data) > MAX_BYTES else None


def _kmsg(path: str, deadline_s: float) -> dict[str, Any]:
    """The part from ``path``; OSError when it cannot be opened or read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    tally = Tally()
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            partial = _saved(fd, tally)
        else:
            partial = _device(fd, tally, time.monotonic() + deadline_s)
    finally:
        os.close(fd)
    return _part(path, tally, partial)


def _dmesg(deadline_s: float) -> tuple[dict[str, Any] | None, str]:
    """The part from ``dmesg --kernel --raw`` (the kernel's records only: util-linux's --raw
    alone prints a record's level but not its facility when it reads /dev/kmsg, so a record
    userspace wrote there looks like the kernel's), or None and why not."""
    dmesg = shutil.which("dmesg")
    if dmesg is None:
        return None, "no dmesg on PATH"
    ran = run_all([[dmesg, "--kernel", "--raw"]], deadline_s)[0]
    text = ran.out.decode("utf-8", "replace")
    if ran.failure is not None or ran.rc != 0:
        said = text.strip().split("\n")[0] or ran.failure or "exit %s" % ran.rc
        return None, "dmesg failed: %s" % visible(said, 160)
    tally = Tally()
    for n, (facility, seconds, message) in enumerate(dmesg_records(text)):
        if n >= MAX_RECORDS:
            return _part("dmesg", tally, "stopped after %d records" % MAX_RECORDS), ""
        tally.add(facility, None, seconds, message)
    return _part("dmesg", tally, None), ""


def read(deadline_s: float = 2.0, path: str | None = None) -> dict[str, Any]:
    """The ``xid`` part: ``read``, ``why`` (when not read), ``source``, how many ``records``
    were read, how many named the driver without being its (``ignored``), ``dropped`` and
    ``partial`` (bounds reached), and one event per Xid code and device. ``path``: the log to
    read (none: ``ENVTOOL_KERNEL_LOG``, else /dev/kmsg and then dmesg)."""
    given = path or os.environ.get(VARIABLE) or None
    try:
        return _kmsg(given or KMSG, deadline_s)
    except OSError as exc:
        kmsg_why = "%s: %s" % (given or KMSG, exc.strerror or exc)
    if given is not None:  # a log named on purpose: this machine's own is never read instead
        return {"read": False, "why": visible(kmsg_why, 300), "events": []}
    part, dmesg_why = _dmesg(deadline_s)
    if part is not None:
        return part
    return {"read": False, "why": visible("%s; %s" % (kmsg_why, dmesg_why), 300), "events": []}
