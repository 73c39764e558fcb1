"""What the history store is asked (history/store.py writes it): the runs, each host's
presence and findings for the timeline, a run's hosts and findings, each host's last good
run, and what the baselines are taken from (judge/baseline.py judges by them)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from envtool.errors import InputError
from envtool.history.store import sizes_read
from envtool.judge.baseline import SIZE_FLOOR, Fleet, FleetBaseline, model_key


@dataclass(frozen=True)
class RunRow:
    """One recorded run."""

    id: int
    at: float
    command: str
    lock_sha256: str
    envtool: str
    user: str
    seconds: float
    ok: bool


Presence = tuple[str, int, float, str]  # host, run, at, checks (history/scope.py)
Seen = tuple[str, float, int, str, str, str]  # host, at, run, kind, subject, severity


@dataclass(frozen=True)
class Span:
    """How many runs a query covers, and its first and last (None: no run)."""

    count: int
    first: RunRow | None
    last: RunRow | None


_RUN = "SELECT id, at, command, coalesce(lock_sha256, ''), envtool, user, seconds, ok FROM run"


def _row(r: tuple[Any, ...]) -> RunRow:
    return RunRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], bool(r[7]))


def runs(db: sqlite3.Connection, since: float = 0.0) -> Iterator[RunRow]:
    """Every run at or after ``since``, oldest first, as the store gives them (a cursor:
    a history of a million runs is never held at once)."""
    return (_row(r) for r in db.execute(f"{_RUN} WHERE at >= ? ORDER BY at, id", (since,)))


def span(db: sqlite3.Connection, since: float = 0.0) -> Span:
    """The runs at or after ``since``: how many, the first, the last."""
    (count,) = db.execute("SELECT count(*) FROM run WHERE at >= ?", (since,)).fetchone()
    ends = [db.execute(f"{_RUN} WHERE at >= ? ORDER BY at {way}, id {way} LIMIT 1",
                       (since,)).fetchone() for way in ("ASC", "DESC")]  # fmt: skip
    first, last = (_row(r) if r else None for r in ends)
    return Span(int(count), first, last)


def at_of(db: sqlite3.Connection, run: int) -> float | None:
    """When run ``run`` was (None: no such run)."""
    found = db.execute("SELECT at FROM run WHERE id = ?", (run,)).fetchone()
    return float(found[0]) if found else None


def observations(
    db: sqlite3.Connection, since: float = 0.0, host: str = "", kind: str = ""
) -> tuple[Iterator[Presence], Iterator[Seen]]:
    """What ``timeline`` reads, two cursors both ordered by host, then run time and id: each
    host's runs, and each finding each host had in them (read while the store is open)."""
    where, args = "r.at >= ?", list[object]([since])
    if host:
        where, args = where + " AND h.host = ?", [*args, host]
    present = db.execute(
        f"SELECT h.host, h.run, r.at, h.checks FROM host_run h JOIN run r ON "
        f"r.id = h.run WHERE {where} ORDER BY h.host, r.at, r.id",
        args,
    )
    fwhere = where.replace("h.host", "f.host") + (" AND f.kind = ?" if kind else "")
    seen = db.execute(f"SELECT f.host, r.at, f.run, f.kind, f.subject, f.severity FROM finding "
                      f"f JOIN run r ON r.id = f.run WHERE {fwhere} ORDER BY f.host, r.at, r.id",
                      [*args, kind] if kind else args)  # fmt: skip
    return present, seen


def latest(
    db: sqlite3.Connection, run: int = 0
) -> tuple[RunRow, list[tuple[str, bool, float | None, str]], list[tuple[str, str, str, str]]]:
    """A run (the latest when ``run`` is 0): its row, its hosts (name, answered, busbw, the
    checks made: history/scope.py), its findings."""
    found_row = (db.execute(f"{_RUN} WHERE id = ?", (run,)) if run else
                 db.execute(f"{_RUN} ORDER BY at DESC, id DESC LIMIT 1")).fetchone()  # fmt: skip
    if found_row is None:
        raise InputError(f"history: no run {run}" if run else "history: no run recorded yet")
    row = _row(found_row)
    hosts = [(h, bool(ok), busbw, made) for h, ok, busbw, made in db.execute(
        "SELECT host, ok, busbw, checks FROM host_run WHERE run = ? ORDER BY host",
        (row.id,))]  # fmt: skip
    found = [tuple(f) for f in db.execute(
        "SELECT host, kind, severity, subject FROM finding WHERE run = ? ORDER BY host, kind",
        (row.id,))]  # fmt: skip
    return row, hosts, found


def sizes(db: sqlite3.Connection, run: int) -> list[tuple[str, int, float]]:
    """Each host's busbw at each size kept in one run (host, bytes, GB/s)."""
    rows = db.execute("SELECT host, sizes FROM host_run WHERE run = ? ORDER BY host", (run,))
    return [(str(h), b, f) for h, kept in rows for b, f in sizes_read(kept)]


def digests(db: sqlite3.Connection, run: int) -> dict[str, str]:
    """Each host's facts digest in one run."""
    return dict(db.execute("SELECT host, digest FROM host_run WHERE run = ?", (run,)).fetchall())


def baselines(db: sqlite3.Connection, allreduce: str, last: int = 10) -> Fleet:
    """Per GPU model and count (``model_key``): the busbw figures of its hosts in the last
    ``last`` runs that measured as ``allreduce`` does, from hosts that answered with no error
    finding in that run (a good run of that host), those runs' ids, and the figures at each
    size kept from ``SIZE_FLOOR`` up (judge/baseline.py)."""
    rows = db.execute(
        "SELECT h.gpu_model, h.gpus, h.busbw, h.run, h.sizes FROM host_run h WHERE h.busbw IS "
        "NOT NULL AND h.ok = 1 AND h.run IN (SELECT id FROM run WHERE allreduce = ? "
        "ORDER BY at DESC, id DESC LIMIT ?) AND NOT EXISTS (SELECT 1 FROM finding f WHERE "
        "f.run = h.run AND f.host = h.host AND f.severity = 'error') ORDER BY h.run",
        (allreduce, last),
    ).fetchall()
    fleet = _by_model((model_key(model, count), busbw, run) for model, count, busbw, run, _ in rows)
    sized: dict[str, dict[int, list[float]]] = {}
    for model, count, _, _, kept in rows:
        for size, figure in sizes_read(kept):
            if size >= SIZE_FLOOR:
                sized.setdefault(model_key(model, count), {}).setdefault(size, []).append(figure)
    return {key: FleetBaseline(base.figures, base.runs, tuple(
        (size, tuple(f)) for size, f in sorted(sized.get(key, {}).items())))
        for key, base in fleet.items()}  # fmt: skip


def last_good(db: sqlite3.Connection, host: str = "") -> dict[str, int]:
    """Each host's last run in which it answered with no error finding (``host``: only it)."""
    # each host's runs walked from its latest down its index, to the first good one
    rows = db.execute(
        "SELECT d.host, (SELECT h.run FROM host_run h WHERE h.host = d.host AND h.ok = 1 AND "
        "NOT EXISTS (SELECT 1 FROM finding f WHERE f.run = h.run AND f.host = h.host AND "
        "f.severity = 'error') ORDER BY h.run DESC LIMIT 1) FROM (SELECT DISTINCT host FROM "
        "host_run WHERE ? = '' OR host = ?) d", (host, host)).fetchall()  # fmt: skip
    return {str(h): int(r) for h, r in rows if r is not None}


def gpu_past(db: sqlite3.Connection, last: int = 10) -> dict[tuple[str, str], tuple[int, int, int]]:
    """Per host and card (``card_key``): the widest PCIe link and the largest memory total it
    reported in the last ``last`` runs, and the last of those runs (0 where none said)."""
    rows = db.execute(
        "SELECT g.host, g.gpu, max(g.pcie_width), max(g.memory_mib), max(g.run) FROM gpu_run g "
        "WHERE g.run IN (SELECT id FROM run ORDER BY at DESC, id DESC LIMIT ?) "
        "GROUP BY g.host, g.gpu", (last,)).fetchall()  # fmt: skip
    return {(str(h), str(g)): (int(w or 0), int(m or 0), int(r)) for h, g, w, m, r in rows}


def pair_baselines(db: sqlite3.Connection, allreduce: str, last: int = 10) -> Fleet:
    """As ``baselines``, for pairs of nodes of one model: the figures of the pairs whose two
    nodes had no error finding in the last ``last`` runs measured alike."""
    rows = db.execute(
        "SELECT p.model, p.busbw, p.run FROM pair_run p WHERE p.run IN (SELECT id FROM run "
        "WHERE allreduce = ? ORDER BY at DESC, id DESC LIMIT ?) AND NOT EXISTS (SELECT 1 FROM "
        "finding f WHERE f.run = p.run AND f.host IN (p.a, p.b) AND f.severity = 'error') "
        "ORDER BY p.run", (allreduce, last)).fetchall()  # fmt: skip
    return _by_model(rows)


def _by_model(rows: Iterable[tuple[str, float, int]]) -> dict[str, FleetBaseline]:
    """(model, busbw, run) rows as each model's figures and the runs they came from."""
    out: dict[str, tuple[list[float], list[int]]] = {}
    for model, busbw, run in rows:
        figures, runs = out.setdefault(str(model), ([], []))
        figures.append(float(busbw))
        if run not in runs:
            runs.append(int(run))
    return {k: FleetBaseline(tuple(f), tuple(r)) for k, (f, r) in out.items()}
