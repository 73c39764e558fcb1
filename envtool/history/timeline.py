"""A finding's life on a host, from the store's observations (pure): when it was first and
last seen, when it cleared (the first run after it in which the host answered without it),
and how often it came back after clearing. A run in which the host was not present, or did
not look for the finding (history/scope.py: it did not answer, or that run did not make the
finding's check on it), says nothing of it: an unreachable night is not a fix."""

from __future__ import annotations

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


def lives(present: Presence, seen: Seen) -> list[Life]:
    """Every (host, kind, subject) ever seen, by host then first seen."""
    by_host: dict[str, list[tuple[int, float, frozenset[str] | None]]] = {}
    for host, run, at, kept in present:
        by_host.setdefault(host, []).append((run, at, scope.read(kept)))
    found: dict[tuple[str, str, str], dict[int, str]] = {}
    for run, host, kind, subject, severity in seen:
        found.setdefault((host, kind, subject), {})[run] = severity
    out = []
    for (host, kind, subject), in_runs in found.items():
        first = last = cleared = None
        came_back = count = 0
        severity = ""
        check = scope.check_key(kind)
        for run, at, made in by_host.get(host, []):
            if made is not None and check not in made and run not in in_runs:
                continue  # this run did not look for it on this host
            if run in in_runs:
                if first is None:
                    first = at
                elif cleared is not None:
                    came_back += 1
                last, cleared, count, severity = at, None, count + 1, in_runs[run]
            elif first is not None and cleared is None:
                cleared = at
        if first is not None and last is not None:
            out.append(Life(host, kind, subject, severity, first, last, cleared, came_back,
                            count))  # fmt: skip
    return sorted(out, key=lambda life: (life.host, life.first_seen, life.kind, life.subject))
