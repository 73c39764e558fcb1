"""What the history store is asked (history/store.py writes it): the runs, each host's
presence and findings for the timeline, a run's hosts and findings, each host's last good
run, and what the baselines are taken from (judge/baseline.py judges by them)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from envtool.errors import InputError
from envtool.history.store import sizes_read
from envtool.judge.baseline import model_key

Figures = dict[str, tuple[tuple[float, ...], tuple[int, ...]]]  # model → figures, their runs


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


def runs(db: sqlite3.Connection, since: float = 0.0) -> list[RunRow]:
    """Every run at or after ``since``, oldest first."""
    rows = db.execute("SELECT id, at, command, coalesce(lock_sha256, ''), envtool, user, "
                      "seconds, ok FROM run WHERE at >= ? ORDER BY at, id", (since,))  # fmt: skip
    return [RunRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], bool(r[7])) for r in rows]


Presence = list[tuple[str, int, float, str]]  # host, run, at, checks (history/scope.py)
Seen = list[tuple[int, str, str, str, str]]  # run, host, kind, subject, severity


def observations(
    db: sqlite3.Connection, since: float = 0.0, host: str = "", kind: str = ""
) -> tuple[Presence, Seen]:
    """What ``timeline`` reads: each host's runs, and each finding each host had in them."""
    where, args = "r.at >= ?", list[object]([since])
    if host:
        where, args = where + " AND h.host = ?", [*args, host]
    present = db.execute(f"SELECT h.host, h.run, r.at, h.checks FROM host_run h JOIN run r ON "
                         f"r.id = h.run "
                         f"WHERE {where} ORDER BY r.at, r.id", args).fetchall()  # fmt: skip
    fwhere = where.replace("h.host", "f.host") + (" AND f.kind = ?" if kind else "")
    seen = db.execute(f"SELECT f.run, f.host, f.kind, f.subject, f.severity FROM finding f "
                      f"JOIN run r ON r.id = f.run WHERE {fwhere}",
                      [*args, kind] if kind else args).fetchall()  # fmt: skip
    return present, seen


def latest(
    db: sqlite3.Connection, run: int = 0
) -> tuple[RunRow, list[tuple[str, bool, float | None, str]], list[tuple[str, str, str, str]]]:
    """A run (the latest when ``run`` is 0): its row, its hosts (name, answered, busbw, the
    checks made: history/scope.py), its findings."""
    rows = runs(db)
    chosen = [r for r in rows if r.id == run] if run else rows[-1:]
    if not chosen:
        raise InputError(f"history: no run {run}" if run else "history: no run recorded yet")
    row = chosen[0]
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


def baselines(db: sqlite3.Connection, allreduce: str, last: int = 10) -> Figures:
    """Per GPU model and count (``model_key``): the busbw figures of its hosts in the last
    ``last`` runs that measured as ``allreduce`` does, from hosts that answered with no error
    finding in that run (a good run of that host), and those runs' ids."""
    rows = db.execute(
        "SELECT h.gpu_model, h.gpus, h.busbw, h.run FROM host_run h WHERE h.busbw IS NOT NULL "
        "AND h.ok = 1 AND h.run IN (SELECT id FROM run WHERE allreduce = ? "
        "ORDER BY at DESC, id DESC LIMIT ?) AND NOT EXISTS (SELECT 1 FROM finding f WHERE "
        "f.run = h.run AND f.host = h.host AND f.severity = 'error') ORDER BY h.run",
        (allreduce, last),
    ).fetchall()
    return _by_model((model_key(model, count), busbw, run) for model, count, busbw, run in rows)


def last_good(db: sqlite3.Connection, host: str = "") -> dict[str, int]:
    """Each host's last run in which it answered with no error finding (``host``: only it)."""
    rows = db.execute(
        "SELECT h.host, max(h.run) FROM host_run h WHERE h.ok = 1 AND (? = '' OR h.host = ?) "
        "AND NOT EXISTS (SELECT 1 FROM finding f WHERE f.run = h.run AND f.host = h.host AND "
        "f.severity = 'error') GROUP BY h.host", (host, host)).fetchall()  # fmt: skip
    return {str(h): int(r) for h, r in rows}


def gpu_past(db: sqlite3.Connection, last: int = 10) -> dict[tuple[str, str], tuple[int, int, int]]:
    """Per host and card (``card_key``): the widest PCIe link and the largest memory total it
    reported in the last ``last`` runs, and the last of those runs (0 where none said)."""
    rows = db.execute(
        "SELECT g.host, g.gpu, max(g.pcie_width), max(g.memory_mib), max(g.run) FROM gpu_run g "
        "WHERE g.run IN (SELECT id FROM run ORDER BY at DESC, id DESC LIMIT ?) "
        "GROUP BY g.host, g.gpu", (last,)).fetchall()  # fmt: skip
    return {(str(h), str(g)): (int(w or 0), int(m or 0), int(r)) for h, g, w, m, r in rows}


def pair_baselines(db: sqlite3.Connection, allreduce: str, last: int = 10) -> Figures:
    """As ``baselines``, for pairs of nodes of one model: the figures of the pairs whose two
    nodes had no error finding in the last ``last`` runs measured alike."""
    rows = db.execute(
        "SELECT p.model, p.busbw, p.run FROM pair_run p WHERE p.run IN (SELECT id FROM run "
        "WHERE allreduce = ? ORDER BY at DESC, id DESC LIMIT ?) AND NOT EXISTS (SELECT 1 FROM "
        "finding f WHERE f.run = p.run AND f.host IN (p.a, p.b) AND f.severity = 'error') "
        "ORDER BY p.run", (allreduce, last)).fetchall()  # fmt: skip
    return _by_model(rows)


def _by_model(rows: Iterable[tuple[str, float, int]]) -> Figures:
    """(model, busbw, run) rows as each model's figures and the runs they came from."""
    out: dict[str, tuple[list[float], list[int]]] = {}
    for model, busbw, run in rows:
        figures, runs = out.setdefault(str(model), ([], []))
        figures.append(float(busbw))
        if run not in runs:
            runs.append(int(run))
    return {k: (tuple(f), tuple(r)) for k, (f, r) in out.items()}
