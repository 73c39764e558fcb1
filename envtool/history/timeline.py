"""A finding's life on a host, from the store's observations (pure): when it was first and
last seen, when it cleared (the first run after it in which the host answered without it),
and how often it came back after clearing. A run in which the host was not present, or did
not look for the finding (history/scope.py: it did not answer, or that run did not make the
finding's check on it), says nothing of it: an unreachable night is not a fix.

Streamed: the store's two cursors come host by host, each in run order, and are walked
together, so what is held at once is one host's findings (each once, however often seen),
never the history's runs: a history of a million runs costs time in proportion, not memory
(bench/bench_history.py, tests/history/test_million.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from envtool.history import scope
from envtool.history.queries import Presence, Seen


@dataclass(frozen=True)
class Life:
    """One finding on one host over the history."""

    host: str
    kind: str
    subject: str
    severity: str  # the last one it was seen with
    first_seen: float
    last_seen: float
    cleared_at: float | None  # None: still there at the host's last run
    came_back: int  # how often it returned after it had cleared
    runs: int  # in how many of the host's runs it was seen


class _Open:
    """A finding's life while its host's runs are walked (the one mutable part, local)."""

    __slots__ = ("back", "cleared", "count", "first", "last", "severity")

    def __init__(self, at: float, severity: str) -> None:
        self.first = self.last = at
        self.cleared: float | None = None
        self.back, self.count, self.severity = 0, 1, severity

    def seen(self, at: float, severity: str) -> None:
        if self.cleared is not None:
            self.back += 1
        self.last, self.cleared, self.severity = at, None, severity
        self.count += 1


Key = tuple[str, str]  # kind, subject


def _host_lives(host: str, walked: dict[Key, _Open]) -> list[Life]:
    out = [Life(host, kind, subject, o.severity, o.first, o.last, o.cleared, o.back, o.count)
           for (kind, subject), o in walked.items()]  # fmt: skip
    return sorted(out, key=lambda life: (life.first_seen, life.kind, life.subject))


def lives(present: Iterable[Presence], seen: Iterable[Seen]) -> Iterator[Life]:
    """Every (host, kind, subject) ever seen, by host then first seen. ``present``: each
    host's runs, ``seen``: each finding each host had in one, both ordered by host, then the
    run's time and id (history/queries.py ``observations``); a finding of a run in which its
    host is not present is none."""
    found = iter(seen)
    pending = next(found, None)
    host: str | None = None
    walked: dict[Key, _Open] = {}
    still: set[Key] = set()  # seen in the host's last run that looked for it
    for name, run, at, kept in present:
        if name != host:
            if host is not None:
                yield from _host_lives(host, walked)
            host, walked, still = name, {}, set()
        here: dict[Key, str] = {}
        while pending is not None and (pending[0], pending[1], pending[2]) <= (name, at, run):
            if (pending[0], pending[1], pending[2]) == (name, at, run):
                here[pending[3], pending[4]] = pending[5]
            pending = next(found, None)
        for key, severity in here.items():
            if key in walked:
                walked[key].seen(at, severity)
            else:
                walked[key] = _Open(at, severity)
            still.add(key)
        made = scope.read(kept)
        for key in [k for k in still if k not in here and scope.looked(made, k[0])]:
            walked[key].cleared = at
            still.discard(key)
    if host is not None:
        yield from _host_lives(host, walked)
