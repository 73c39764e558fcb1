"""``envtool history`` (each finding's life on each host), ``history diff RUN RUN``,
``history prune --keep-days N`` and ``envtool metrics`` (the latest run's metrics): the
store read (history/store.py), decided (history/timeline.py, pure), printed (report/)."""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from envtool.errors import EXIT_OK, InputError
from envtool.history import metrics, queries, scope, store, timeline
from envtool.report import history_text

_AGO = re.compile(r"(\d{1,6})([dhm])")


def since(text: str, now: float) -> float:
    """``7d``, ``12h``, ``30m`` ago, or an ISO date or time (UTC when it names no zone)."""
    if not text:
        return 0.0
    if m := _AGO.fullmatch(text):
        return now - int(m[1]) * {"d": 86400, "h": 3600, "m": 60}[m[2]]
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"--since {text!r}: not 7d, 12h, 30m or an ISO date/time") from None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


@dataclass(frozen=True)
class HistoryArgs:
    """What ``envtool history`` was asked."""

    path: Path
    host: str = ""
    kind: str = ""
    since: str = ""
    fmt: str = "text"


def run(args: HistoryArgs) -> int:
    """The timeline; 0 (a history is read, not judged)."""
    with store.opened(args.path, create=False) as db:
        start = since(args.since, time.time())
        lives = list(timeline.lives(*queries.observations(db, start, args.host, args.kind)))
        good = queries.last_good(db, args.host)
        good_at = queries.at_of(db, good.get(args.host, 0))
        history_text.timeline(lives, queries.span(db, start), args.fmt, queries.runs(db, start),
                              (good, args.host, good_at))  # fmt: skip
    return EXIT_OK


def diff(path: Path, a: int, b: int, fmt: str) -> int:
    """What changed on which host between two runs."""
    with store.opened(path, create=False) as db:
        (_, hosts_a, found_a), (_, hosts_b, found_b) = queries.latest(db, a), queries.latest(db, b)
        digests = queries.digests(db, a), queries.digests(db, b)
    checked_b = {h: scope.read(made) for h, _, _, made in hosts_b}
    history_text.diff(a, b, [h for h, *_ in hosts_a], checked_b, found_a, found_b, digests,
                      fmt)  # fmt: skip
    return EXIT_OK


def prune(path: Path, keep_days: int) -> int:
    """Runs older than ``keep_days`` removed."""
    with store.opened(path, create=False) as db:
        gone = store.prune(db, time.time() - keep_days * 86400)
    history_text.pruned(path, gone, keep_days)
    return EXIT_OK


def show_metrics(path: Path, run_id: int = 0) -> int:
    """The latest (or ``run_id``'s) run's metrics, as the textfile collector reads them."""
    with store.opened(path, create=False) as db:
        row, hosts, found = queries.latest(db, run_id)
        sized = queries.sizes(db, row.id)
    snap = metrics.Snapshot(row.at, row.seconds, row.lock_sha256, tuple(hosts), tuple(found),
                            tuple(sized))  # fmt: skip
    sys.stdout.write(metrics.text(snap))
    return EXIT_OK
