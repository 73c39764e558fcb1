"""The kernel log's records since a moment, one record a line, from the sources the Xid
reader takes (envtool_node/xid.py): the path given, else ``ENVTOOL_KERNEL_LOG``, else
``/dev/kmsg`` read without blocking, else ``dmesg --kernel --raw``. A log named on purpose is
never replaced by this machine's own (how tests give a node its log).

Records keep their source's own form: ``PRIO,SEQ,USEC,FLAGS;MESSAGE`` from /dev/kmsg or a saved
copy of it (a record's `` KEY=VALUE`` lines dropped), ``<PRIO>[SECONDS] MESSAGE`` from dmesg (a
record's further lines joined with ``\\x0a``, as /dev/kmsg escapes them). A record's time is
seconds since boot; ``since`` (epoch seconds) is turned into that with this machine's boot."""

from __future__ import annotations

import os
import shutil
import stat
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from envtool_node.xid import KMSG, MAX_BYTES, MAX_RECORDS, VARIABLE, read_kmsg
from envtool_node.xid_parse import DMESG, kmsg_lines, kmsg_record

Record = tuple[float | None, str]  # seconds since boot (None: unknown), the line


@dataclass(frozen=True)
class KernelLog:
    """What was read: the records kept, and how many were not."""

    source: str
    lines: tuple[str, ...]
    before: int  # records older than ``since``
    dropped: int  # the oldest records past the bound on kernel.log
    partial: str | None  # the read stopped early (a bound), why
    why: str | None  # nothing read: why


def boot_epoch() -> float:
    """This machine's boot, in epoch seconds (the kernel log's records count from it)."""
    return time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)


def _first_line(record: str) -> str:
    return record.split("\n", 1)[0]


def _kmsg(line: str) -> Record:
    parsed = kmsg_record(line)
    return (parsed[2] if parsed is not None else None), line


def _device(fd: int, deadline: float, out: list[Record]) -> str | None:
    return read_kmsg(fd, deadline, lambda text: out.append(_kmsg(_first_line(text))))


def _read_kmsg(path: str, deadline_s: float) -> tuple[list[Record], str | None]:
    """The records of ``path`` (a /dev/kmsg device, or a saved copy); OSError when unread."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    out: list[Record] = []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return out, _device(fd, time.monotonic() + deadline_s, out)
        data = os.read(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    for n, line in enumerate(kmsg_lines(data[:MAX_BYTES].decode("utf-8", "replace"))):
        if n >= MAX_RECORDS:
            return out, f"stopped after {MAX_RECORDS} records"
        out.append(_kmsg(line))
    return out, (f"stopped after {MAX_BYTES >> 20} MiB" if len(data) > MAX_BYTES else None)


def dmesg_lines(text: str) -> Iterator[Record]:
    """Each record of ``dmesg --raw`` text as one line; an indented line continues the last."""
    current: list[str] = []
    seconds: float | None = None
    for line in text.split("\n"):
        if current and line[:1] in (" ", "\t"):
            current.append(line)
            continue
        if current:
            yield seconds, "\\x0a".join(current)
        found = DMESG.match(line)
        current = [line] if found is not None else []
        seconds = float(found.group(2)) if found is not None and found.group(2) else None
    if current:
        yield seconds, "\\x0a".join(current)


def _read_dmesg(deadline_s: float) -> tuple[list[Record], str]:
    from envtool import proc

    dmesg = shutil.which("dmesg")
    if dmesg is None:
        return [], "no dmesg on PATH"
    try:
        ran = proc.run([dmesg, "--kernel", "--raw"], timeout=deadline_s, check=False,
                       limits=(MAX_BYTES, 64 * 1024))  # fmt: skip
    except proc.ProcessError as exc:
        return [], f"dmesg: {exc}"
    if ran.returncode != 0:
        return [], f"dmesg failed: {(ran.stderr.strip() or f'exit {ran.returncode}')[:160]}"
    return list(dmesg_lines(ran.stdout))[:MAX_RECORDS], ""


def since_boot(records: Iterable[Record], since_s: float | None, keep_bytes: int) -> KernelLog:
    """The records at or after ``since_s`` (seconds since boot; None: all), the newest
    ``keep_bytes`` of them (a record without a time is kept: its place in the log dates it)."""
    kept: deque[str] = deque()
    size = before = dropped = 0
    for seconds, line in records:
        if since_s is not None and seconds is not None and seconds < since_s:
            before += 1
            continue
        kept.append(line)
        size += len(line.encode()) + 1
        while size > keep_bytes and kept:
            size -= len(kept.popleft().encode()) + 1
            dropped += 1
    return KernelLog("", tuple(kept), before, dropped, None, None)


def read(since: float | None, path: str | None, keep_bytes: int, deadline_s: float = 5.0,
         boot: float | None = None) -> KernelLog:  # fmt: skip
    """The kernel records since ``since`` (epoch seconds; None: since boot) from ``path``, else
    ENVTOOL_KERNEL_LOG, else this machine's log. ``boot``: its boot time (default: this
    machine's)."""
    given = path or os.environ.get(VARIABLE) or None
    since_s = None if since is None else since - (boot_epoch() if boot is None else boot)
    try:
        records, partial = _read_kmsg(given or KMSG, deadline_s)
        source = given or KMSG
    except OSError as exc:
        why = f"{given or KMSG}: {exc.strerror or exc}"
        if given is not None:  # a log named on purpose: this machine's is never read instead
            return KernelLog(given, (), 0, 0, None, why)
        records, dmesg_why = _read_dmesg(deadline_s)
        if dmesg_why:
            return KernelLog("dmesg", (), 0, 0, None, f"{why}; {dmesg_why}")
        source, partial = "dmesg", None
    kept = since_boot(records, since_s, keep_bytes)
    return KernelLog(source, kept.lines, kept.before, kept.dropped, partial, None)
