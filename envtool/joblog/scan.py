"""One file of a job's log summed up in one pass: each line's origin and sign, the first
``MAX_KEPT`` lines of each sign kept as evidence (the others counted), and what the file
says of its writers (the ranks and hosts it names, bounded too). Pure: it is handed lines.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from envtool.joblog import ras
from envtool.joblog.kernel import header_value
from envtool.joblog.origin import Origin, strip
from envtool.joblog.patterns import classify
from envtool.joblog.signs import WAITED, Detail, Sign, Tier
from envtool.joblog.stream import RawLine

MAX_KEPT = 16  # lines kept of each sign in a file (the first ones: the cause comes first)
MAX_KEYS = 4096  # ranks, hosts and NCCL processes remembered in a file
EVIDENCE_CHARS = 400  # characters kept of an evidence line
MAX_CUT = 8  # long lines remembered by number


@dataclass(frozen=True)
class Event:
    """One line that is a sign of something, as evidence: where it is, what it says."""

    sign: Sign
    file: str
    line: int
    text: str  # the line as written (prefixes on), at most EVIDENCE_CHARS characters
    origin: Origin
    detail: Detail = ()

    def get(self, key: str) -> str | None:
        """A value the line names (``seq``, ``peer``, ...), None when it names none."""
        return next((v for k, v in self.detail if k == key), None)


@dataclass(frozen=True)
class FileScan:
    """What one file holds."""

    path: str
    lines: int
    attributed: int  # lines a prefix or NCCL header attributes to a host or rank
    odd: int  # lines with NUL bytes or bytes that are not UTF-8
    cut: tuple[tuple[int, int], ...]  # (line, bytes) of the first lines longer than the cap
    cut_count: int
    events: tuple[Event, ...]  # in line order
    counts: tuple[tuple[Sign, int], ...]  # lines of each sign, kept or not
    ranks: tuple[int, ...]  # ranks the file names (at most MAX_KEYS)
    hosts: tuple[str, ...]  # hosts the file names (at most MAX_KEYS)
    headers: tuple[Event, ...] = ()  # the first line of each host's each NCCL header value
    rank_hosts: tuple[tuple[int, str], ...] = ()  # the host a prefix first gave each rank
    waited: tuple[int, ...] = ()  # ranks with a sign of signs.WAITED (every one, bounded)


def header(event: Event) -> tuple[str, str]:
    """(key, value) of a header line, its value as compared across hosts."""
    key = event.get("key") or ""
    return key, header_value(key, event.get("value") or "")


def _with_rank(origin: Origin, detail: Detail) -> Origin:
    """A rank the message itself names (``[Rank 3]``, ``local_rank=0``) where no prefix did."""
    said = dict(detail)
    if origin.host is None and "host" in said:  # a journal line names its host
        origin = replace(origin, host=said["host"], via=(*origin.via, "journal"))
    if origin.rank is None and "rank" in said:
        return replace(origin, rank=int(said["rank"]), via=(*origin.via, "message"))
    if origin.local_rank is None and "local_rank" in said:
        return replace(origin, local_rank=int(said["local_rank"]), via=(*origin.via, "message"))
    return origin


class _Scanner:
    def __init__(self, path: str, host: str | None = None) -> None:
        self.path = path
        self.host = host  # the host a collect folder says wrote the file
        self.headers: dict[tuple[str | None, str, str], Event] = {}
        self.lines = self.attributed = self.odd = self.cut_count = 0
        self.cut: list[tuple[int, int]] = []
        self.events: list[Event] = []
        self.counts: dict[Sign, int] = {}
        self.ranks: set[int] = set()
        self.hosts: set[str] = set()
        self.rank_hosts: dict[int, str] = {}
        self.waited: set[int] = set()
        self.ras = ras.Reader()
        self.init: dict[tuple[str, int], Event] = {}  # NCCL processes that began init
        self.complete: set[tuple[str, int]] = set()

    def feed(self, raw: RawLine) -> None:
        self.lines += 1
        self.odd += raw.odd
        if raw.cut:
            self.cut_count += 1
            if len(self.cut) < MAX_CUT:
                self.cut.append((raw.number, raw.length))
        text, origin = strip(raw.text)
        if self.host is not None and origin.host is None:
            origin = replace(origin, host=self.host, via=(*origin.via, "collect folder"))
        found = self.ras.feed(text)
        if found is not None:  # the node RAS names, not the one that ran the client
            peer = dict(found[1]).get("peer")  # None: RAS named no node (2.24's rank list)
            origin = replace(origin, host=peer, via=(*origin.via, "nccl ras"))
        else:
            found = classify(text)
        if found is not None:
            origin = _with_rank(origin, found[1])
        if origin.attributed:
            self.attributed += 1
            if origin.rank is not None and len(self.ranks) < MAX_KEYS:
                self.ranks.add(origin.rank)
            if origin.host is not None and len(self.hosts) < MAX_KEYS:
                self.hosts.add(origin.host)
            self._place(origin)
        if found is None:
            return
        sign, detail = found
        if sign in WAITED and origin.rank is not None and len(self.waited) < MAX_KEYS:
            self.waited.add(origin.rank)
        event = Event(sign, self.path, raw.number, raw.text[:EVIDENCE_CHARS], origin, detail)
        self._track_init(event)
        if sign is Sign.HEADER:
            key = (origin.host, *header(event))
            if key not in self.headers and len(self.headers) < MAX_KEYS:
                self.headers[key] = event
        n = self.counts.get(sign, 0)
        self.counts[sign] = n + 1
        if n < MAX_KEPT:
            self.events.append(event)

    def _place(self, o: Origin) -> None:
        if o.rank is None or o.host is None or o.rank in self.rank_hosts:
            return
        if len(self.rank_hosts) < MAX_KEYS:
            self.rank_hosts[o.rank] = o.host

    def _track_init(self, event: Event) -> None:
        o = event.origin
        if o.host is None or o.pid is None:
            return
        key = (o.host, o.pid)
        if event.sign is Sign.INIT_DONE:
            if len(self.complete) < MAX_KEYS:
                self.complete.add(key)
        elif key in self.init or len(self.init) < MAX_KEYS:
            self.init[key] = event  # its latest line: where its log ends

    def done(self) -> FileScan:
        events = list(self.events)
        pending = [e for key, e in self.init.items() if key not in self.complete]
        failed = any(s.tier < Tier.CONTEXT for s in self.counts)
        if pending and not failed:  # NCCL began its init and the log ends before it completed
            last = max(pending, key=lambda e: e.line)
            detail = (("processes", str(len(pending))),)
            events.append(replace(last, sign=Sign.INIT_INCOMPLETE, detail=detail))
            self.counts[Sign.INIT_INCOMPLETE] = 1
        return FileScan(
            self.path,
            self.lines,
            self.attributed,
            self.odd,
            tuple(self.cut),
            self.cut_count,
            tuple(sorted(events, key=lambda e: e.line)),
            tuple(self.counts.items()),
            tuple(sorted(self.ranks)),
            tuple(sorted(self.hosts)),
            tuple(self.headers.values()),
            tuple(sorted(self.rank_hosts.items())),
            tuple(sorted(self.waited)),
        )


def scan(path: str, lines: Iterable[RawLine], host: str | None = None) -> FileScan:
    """Every line of one file, read once (``host``: who wrote it, where a collect folder
    says so and no line's prefix does)."""
    scanner = _Scanner(path, host)
    for raw in lines:
        scanner.feed(raw)
    return scanner.done()
