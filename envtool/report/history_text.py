"""The history's words: what a run could not record, and ``envtool history``'s timeline (one
line per host and finding, hosts with the same story folded into one node set)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from datetime import datetime, timezone

from envtool.history import scope
from envtool.history.queries import RunRow, Span
from envtool.history.timeline import Life
from envtool.protocol import schemas
from envtool.report.text import visible
from envtool.report.verify import nodeset


def not_recorded(said: str) -> None:
    """A warning on stderr: the run's verdict stands."""
    print(f"envtool: {visible(said)}", file=sys.stderr)


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M")


def _folded(lives: Sequence[Life]) -> list[tuple[str, Life]]:
    groups: dict[tuple[object, ...], list[Life]] = {}
    for life in lives:
        key = (life.kind, life.subject, life.severity, life.first_seen, life.last_seen,
               life.cleared_at, life.came_back)  # fmt: skip
        groups.setdefault(key, []).append(life)
    out = [(nodeset([lf.host for lf in group]), group[0]) for group in groups.values()]
    return sorted(out, key=lambda pair: (pair[1].first_seen, pair[0], pair[1].kind))


def _json(lives: Sequence[Life], runs: Iterable[RunRow], good: dict[str, int]) -> None:
    """The timeline as JSON, its runs written as the store's cursor gives them (a million
    runs are never one object)."""
    out = sys.stdout
    out.write('{\n  "findings": ' + _nested(json.dumps([asdict(lf) for lf in lives],
                                                        indent=2, sort_keys=True)))  # fmt: skip
    out.write(',\n  "last_good": ' + _nested(json.dumps(good, indent=2, sort_keys=True)))
    out.write(',\n  "runs": [')
    for n, row in enumerate(runs):
        out.write(("," if n else "") + "\n    " + json.dumps(asdict(row), sort_keys=True))
    out.write(f'\n  ],\n  "schema": {json.dumps(schemas.HISTORY)}\n}}\n')


def _nested(text: str) -> str:
    return text.replace("\n", "\n  ")


def timeline(
    lives: Sequence[Life],
    span: Span,
    fmt: str,
    runs: Iterable[RunRow] = (),
    last_good: tuple[dict[str, int], str, float | None] = ({}, "", None),
) -> None:
    """Each finding's life: first seen, last seen, cleared at, how often it came back;
    ``last_good``: each host's last good run, and with a host, that host's and its time.
    JSON lists ``runs`` (a cursor); the text says ``span``."""
    good, host, good_at = last_good
    if fmt == "json":
        _json(lives, runs, good)
        return
    first, last, shown = span.first, span.last, ""
    if first is not None and last is not None:
        shown = f" (ids {first.id}–{last.id}, {_when(first.at)} to {_when(last.at)})"
    print(f"history: {span.count} runs{shown}; {len(lives)} findings on hosts")
    rows = [("hosts", "finding", "first seen", "last seen", "cleared", "back")]
    for hosts, life in _folded(lives):
        what = f"{life.kind} {life.subject}".strip()
        cleared = _when(life.cleared_at) if life.cleared_at is not None else "still there"
        rows.append((hosts, f"{what} ({life.severity})", _when(life.first_seen),
                     _when(life.last_seen), cleared, str(life.came_back)))  # fmt: skip
    widths = [max(len(visible(r[i])) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(visible(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if host:
        run = good.get(host)
        said = f"run {run} ({_when(good_at)})" if run is not None else "none recorded"
        print(visible(f"last good run of {host}: {said}"))


def pruned(path: object, gone: int, days: int) -> None:
    """What ``history prune`` removed."""
    print(f"history {path}: {gone} runs older than {days} days removed")


Found = list[tuple[str, str, str, str]]  # host, kind, severity, subject


Digests = tuple[dict[str, str], dict[str, str]]  # each host's facts digest, run A and run B


def diff(a: int, b: int, hosts_a: list[str], hosts_b: dict[str, frozenset[str] | None],
         found_a: Found, found_b: Found, digests: Digests, fmt: str) -> None:  # fmt: skip
    """Per host: findings new in run B, gone since run A (cleared, or not looked for by run
    B: ``hosts_b``' checks, history/scope.py), facts changed, hosts in one run only."""
    rows = []
    for host in sorted(set(hosts_a) | set(hosts_b)):
        if host not in hosts_b:
            rows.append((host, "not in run B", ""))
            continue
        if host not in hosts_a:
            rows.append((host, "not in run A", ""))
        was = {(k, s, sev) for h, k, sev, s in found_a if h == host}
        now = {(k, s, sev) for h, k, sev, s in found_b if h == host}
        rows += [(host, "new", f"{k} {s} ({sev})".strip()) for k, s, sev in sorted(now - was)]
        rows += [(host, "cleared" if scope.looked(hosts_b[host], k) else "not checked in run B",
                  f"{k} {s} ({sev})".strip()) for k, s, sev in sorted(was - now)]  # fmt: skip
        if host in hosts_a and digests[0].get(host) != digests[1].get(host):
            rows.append((host, "facts changed", ""))
    if fmt == "json":
        doc = {"schema": schemas.HISTORY_DIFF, "a": a, "b": b,
               "changes": [{"host": h, "change": c, "finding": f} for h, c, f in rows]}  # fmt: skip
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        return
    print(f"history diff: run {a} → run {b}: {len(rows)} change{'' if len(rows) == 1 else 's'}")
    for host, change, finding in rows:
        print(visible(f"  {host}  {change}  {finding}".rstrip()))
